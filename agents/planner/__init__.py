"""Planners: graph -> Plan.  `builtin` is the deterministic fusion scheduler."""

"""ATen convolution ops as the planner captures them: it leaves them to cuDNN (library calls,
some channels-last), and the coder gives every program holding one the layout copy those need.
Both read this table, so they agree on what a convolution is."""

from __future__ import annotations

CONV_OPS = frozenset({"aten.conv1d.default", "aten.conv2d.default", "aten.conv3d.default",
                      "aten.convolution.default", "aten.conv2d.padding", "aten.conv1d.padding",
                      "aten.conv3d.padding", "aten.conv_transpose1d.default",
                      "aten.conv_transpose2d.input", "aten.conv_transpose3d.input"})

"""Task modules used only by the worker tests (allowed with allowed_prefixes=("worker_tasks.",))."""

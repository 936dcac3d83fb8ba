"""ring3 with --placement=spread: the default guest, its processes in stub processes, ring3
and the running stub each spinning for the other on any cores, as the default placement was
before it was chosen by measurement (--placement=auto, stub/placement.c)."""
from . import ring3

NAME = "ring3 placement=spread"
prepare, run, boot_seconds = ring3.with_options("--placement", "spread")

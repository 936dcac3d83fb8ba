"""ring3 with --isolation=none: the default guest with its processes in the monitor's own
process, as the paper ran them (faster, but a hostile guest process can reach the monitor)."""
from . import ring3

NAME = "ring3 isolation=none"
prepare, run, boot_seconds = ring3.with_options("--isolation", "none")

"""ring3 with --syscalls=sysemu: the default guest, its processes in stub processes that ring3
traces, each system call a PTRACE_SYSEMU stop (the paper's redirection, from the UML patch)
instead of the seccomp trap the stub hands off itself (the default, --syscalls=sud)."""
from . import ring3

NAME = "ring3 syscalls=sysemu"
prepare, run, boot_seconds = ring3.with_options("--syscalls", "sysemu")

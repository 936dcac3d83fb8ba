"""ring3 running the same kernel source built in insert mode (the paper's PE-Insert):
build/guest/bzImage-insert, where each sensitive instruction traps (a marker's #UD, or its own
#GP) and the monitor decodes it with Capstone, with the default initramfs."""
from . import INITRAMFS, ROOT
from . import ring3

NAME = "ring3 insert"
KERNEL = ROOT / "build" / "guest" / "bzImage-insert"
# naming a kernel drops the default initramfs
prepare, run, boot_seconds = ring3.with_options("--initrd", INITRAMFS, KERNEL, kernel=KERNEL)

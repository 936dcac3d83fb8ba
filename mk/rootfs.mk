# The guest's Debian 12 (bookworm) i386 root filesystem, for its virtio disk (make run ROOT=debian).
#
#   make rootfs   build/rootfs.img: ext4, 2 GiB sparse, label ring3-root; minbase with gcc,
#                 make, gdb, strace and sysvinit as init, GNU patch 2.7.6's source in /usr/src
#                 (rootfs/build.sh: mmdebstrap from the mirror the system's apt names; root,
#                 through sudo when not root). Beside it in build/rootfs/: tree (the same root
#                 unpacked, for the native benchmark's chroot) and patch-2.7.6.tar.xz.
#
# The image is rebuilt only when a file of rootfs/ or this fragment changes; the build makes it
# under a temporary name, so that a failed one leaves no image behind.

ROOTFS_IMG := $(B)/rootfs.img
ROOTFS_DIR := $(B)/rootfs

.PHONY: rootfs
rootfs: $(ROOTFS_IMG)

$(ROOTFS_IMG): $(wildcard rootfs/*) mk/rootfs.mk
	rootfs/build.sh $(ROOTFS_DIR) $@
# Made by the same run; the empty recipe makes make look at its time again afterwards.
$(ROOTFS_DIR)/patch-2.7.6.tar.xz: $(ROOTFS_IMG) ;

# The tests that boot the Debian root need the image.
TEST_DEPS += $(ROOTFS_IMG)

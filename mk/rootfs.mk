# The guest's Debian 12 (bookworm) i386 root filesystem, for its virtio disk (make run ROOT=debian).
#
#   make rootfs   build/rootfs.img: ext4, 2 GiB sparse, label ring3-root; minbase with gcc,
#                 make, gdb, strace and sysvinit as init, GNU patch 2.7.6's source in /usr/src
#                 (rootfs/build.sh: mmdebstrap from the mirror the system's apt names; root,
#                 through sudo when not root). Beside it in build/rootfs/: tree (the same root
#                 unpacked, for the native benchmark's chroot) and patch-2.7.6.tar.xz.
#   make rootfs INIT=systemd
#                 build/rootfs-systemd.img: the same root with systemd as init (its work in
#                 build/rootfs-systemd/); `make run ROOT=debian INIT=systemd` boots it.
#
# The image is rebuilt only when a file of rootfs/ or this fragment changes; the build makes it
# under a temporary name, so that a failed one leaves no image behind.

ROOTFS_IMG := $(B)/rootfs.img
ROOTFS_DIR := $(B)/rootfs
ROOTFS_SYSTEMD_IMG := $(B)/rootfs-systemd.img
INIT ?= sysvinit
ifeq ($(INIT),systemd)
ROOTFS_RUN_IMG := $(ROOTFS_SYSTEMD_IMG)
else ifeq ($(INIT),sysvinit)
ROOTFS_RUN_IMG := $(ROOTFS_IMG)
else
$(error INIT=$(INIT): the Debian root's init is INIT=sysvinit (the default) or INIT=systemd)
endif

.PHONY: rootfs
rootfs: $(ROOTFS_RUN_IMG)

$(ROOTFS_IMG): $(wildcard rootfs/*) mk/rootfs.mk
	rootfs/build.sh $(ROOTFS_DIR) $@
$(ROOTFS_SYSTEMD_IMG): $(wildcard rootfs/*) mk/rootfs.mk
	rootfs/build.sh $(B)/rootfs-systemd $@ systemd
# Made by the same run; the empty recipe makes make look at its time again afterwards.
$(ROOTFS_DIR)/patch-2.7.6.tar.xz: $(ROOTFS_IMG) ;

# The tests that boot the Debian root need the image.
TEST_DEPS += $(ROOTFS_IMG) $(ROOTFS_SYSTEMD_IMG)

# ring3: top-level build. `make run` boots the default guest, `make test` runs every test.
# Each part of the tree keeps its own rules in mk/<part>.mk; this file holds what they share.

.DEFAULT_GOAL := all
SHELL := /bin/bash

B        := build
BIN      := $(B)/bin
PYTHON   := /usr/bin/python3
CC       := gcc
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -I. -Iinclude
# The device models and parsers alone (unit tests under SANITIZE=1, fuzz targets' replays) with
# AddressSanitizer and UndefinedBehaviorSanitizer, in build/obj-asan.
SAN_COMMON  := -fno-sanitize-recover=all -fno-omit-frame-pointer
SAN_FLAGS   := -fsanitize=address,undefined $(SAN_COMMON)
ASAN_CFLAGS := $(filter-out -O2,$(BASE_CFLAGS)) -O1 $(SAN_FLAGS)

# SANITIZE=1 (e.g. make test SANITIZE=1): build/bin/ring3, the stub's test driver and the test
# harnesses with UndefinedBehaviorSanitizer and LeakSanitizer, in build/obj-san, and the device
# unit tests with AddressSanitizer too. Not the monitor with AddressSanitizer: its shadow memory
# begins at 0x7fff8000, inside the low 4 GiB that the guest's memory needs (ring3 says so and
# stops). Not the stub image either: it runs without libc, which the sanitizers' runtimes need.
# build/.sanitize records which build the binaries are, so that switching relinks them.
SANITIZE ?=
ifeq ($(SANITIZE),)
OBJ    := $(B)/obj
CFLAGS := $(BASE_CFLAGS)
else ifeq ($(SANITIZE),1)
OBJ    := $(B)/obj-san
CFLAGS := $(BASE_CFLAGS) -fsanitize=undefined,leak $(SAN_COMMON)
else
$(error SANITIZE=$(SANITIZE): the only value is SANITIZE=1)
endif
LDFLAGS   := $(filter -fsanitize=%,$(CFLAGS))
SAN_STAMP := $(B)/.sanitize
$(shell mkdir -p $(B); [ -e $(SAN_STAMP) ] && [ "$$(cat $(SAN_STAMP))" = "$(SANITIZE)" ] || echo "$(SANITIZE)" > $(SAN_STAMP))
JOBS     ?= $(shell nproc)

# Debian packages, installed when missing (tools/install-deps.sh is idempotent and quick when done).
DEPS := gcc gcc-multilib binutils make python3 python3-pytest python3-hypothesis python3-capstone libcapstone-dev libslirp-dev \
        gdb qemu-system-x86 linux-source-6.12 busybox-static:i386 python3-matplotlib \
        bison flex bc libelf-dev libssl-dev cpio xz-utils mmdebstrap arch-test e2fsprogs \
        openssh-client iperf3 iputils-ping passt

.PHONY: all deps test soak run gdb bench clean
all: $(BIN)/ring3 $(BIN)/ring3-as

# Installed while the Makefile is read, so that no rule (even under -j) runs before its tools
# are there. Quick when everything is present.
ifeq ($(filter clean,$(MAKECMDGOALS)),)
ifneq ($(shell tools/install-deps.sh $(DEPS) >&2; echo $$?),0)
$(error tools/install-deps.sh failed; see the lines above)
endif
endif
deps:

# Each mk/<part>.mk adds the targets its tests need to TEST_DEPS.
TEST_DEPS :=
include $(sort $(wildcard mk/*.mk))

# TESTS=...: only these test files (or pytest node ids).
TESTS ?= tests
test: all $(TEST_DEPS)
	$(PYTHON) -m pytest -q --durations=25 $(TESTS)

# The long runs (RING3_SOAK=1; tests/conftest.py, soak_size): the stress tests at their long sizes
# (signals at 10,000 points of a computing process in both isolation modes, 1,000,000 timer
# interrupts sampled for leaks), GNU patch built on a root another ring3 serves, and for
# SOAK_MINUTES (default 60) GNU patch built in a loop beside a guest-process stress, sampled for
# the monitors' memory and descriptors (tests/test_soak.py).
SOAK_TESTS := tests/test_sigstress.py tests/test_leaks.py tests/test_ikc_disk.py tests/test_soak.py
SOAK_MINUTES ?= 60
soak: all $(TEST_DEPS)
	RING3_SOAK=1 SOAK_MINUTES=$(SOAK_MINUTES) $(PYTHON) -m pytest -q -s --durations=10 $(SOAK_TESTS)

clean:
	rm -rf $(B)/bin $(B)/obj $(B)/obj-san $(B)/obj-asan $(B)/fuzz $(B)/tests $(B)/testguests

# The default guest: Linux with the busybox initramfs, on this terminal (README).
# ROOT=debian: the same kernel with build/rootfs.img (make rootfs) as its root disk;
# INIT=systemd: build/rootfs-systemd.img, the same root with systemd as init.
ROOT ?=
ifeq ($(ROOT),debian)
RUN_DEPS = $(ROOTFS_RUN_IMG)
RUN_ARGS = --disk $(ROOTFS_RUN_IMG)
RUN_APPEND = root=/dev/vda
else ifneq ($(ROOT),)
$(error ROOT=$(ROOT): the only other root is ROOT=debian)
endif
# NET=...: the guest's --net (e.g. NET=user,hostfwd=tcp:127.0.0.1:2222-:22).
NET ?=
run: all initramfs $(RUN_DEPS)
	@$(MAKE) --no-print-directory $(if $(wildcard $(B)/guest/bzImage),GUEST_FORCE=) guest-kernel
	$(BIN)/ring3 run $(RUN_ARGS) $(if $(RUN_APPEND),--append '$(RUN_APPEND)') $(if $(NET),--net $(NET))

# The same guest under `ring3 run -S`, and the system's gdb on its vmlinux (debug information,
# guest/linux/debug.config) with Linux's scripts/gdb loaded (lx-dmesg, lx-ps, ...), connected
# over a UNIX socket; README, "Debugging the guest kernel". gdb has this terminal: the guest's
# console goes to build/gdb/console.log. CMD='...': the guest runs it (--cmd) and powers off;
# GDB_ARGS: more arguments for gdb (e.g. -batch -x FILE). Quitting gdb ends the guest. The
# guest's clock is the PIT, not the TSC: ring3 stops the PIT while gdb holds the guest, and so
# the guest's time stands still, as on QEMU, instead of jumping ahead at each continue. Ctrl-C
# is gdb's alone: ring3 runs in a session of its own, and the recipe's shell ignores it.
GDB_APPEND := clocksource=pit tsc=unstable
GDB_DIR := $(B)/gdb
CMD ?=
GDB_ARGS ?=
gdb: all initramfs $(RUN_DEPS)
	@$(MAKE) --no-print-directory $(if $(wildcard $(B)/guest/bzImage),GUEST_FORCE=) guest-kernel
	@mkdir -p $(GDB_DIR) && rm -f $(GDB_DIR)/gdb.sock
	@echo "ring3: the guest's console is in $(GDB_DIR)/console.log"
	@trap '' INT; setsid $(BIN)/ring3 run -S --gdb unix:$(GDB_DIR)/gdb.sock --serial file:$(GDB_DIR)/console.log \
	    $(RUN_ARGS) --append '$(strip $(RUN_APPEND) $(GDB_APPEND))' $(if $(NET),--net $(NET)) \
	    $(if $(CMD),--cmd '$(CMD)') </dev/null & ring3=$$!; \
	  until [ -S $(GDB_DIR)/gdb.sock ] || ! kill -0 $$ring3 2>/dev/null; do sleep 0.05; done; \
	  gdb -q -iex 'add-auto-load-safe-path $(abspath $(GUEST_DIR)/rewritten)' \
	      -ex 'target remote $(GDB_DIR)/gdb.sock' $(GDB_ARGS) $(GUEST_DIR)/rewritten/vmlinux; \
	  status=$$?; kill $$ring3 2>/dev/null; wait $$ring3; exit $$status

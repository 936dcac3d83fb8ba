# Fuzz targets (fuzz/fuzz_<name>.c, each an LLVMFuzzerTestOneInput over one parser of guest or user
# input) in two builds:
# - build/fuzz/<name>: libFuzzer with AddressSanitizer and UndefinedBehaviorSanitizer, through
#   Debian's clang, for `make fuzz` (FUZZ_SECONDS each, default 60; FUZZ=name,... for some). It
#   searches from fuzz/corpus/<name> and build/fuzz/found/<name> (what it found before), and the
#   inputs that cover new edges are merged back into fuzz/corpus/<name> (commit them). A crash
#   stops the run, with the input in build/fuzz/crashes/.
# - build/tests/fuzz/<name>: the same target with fuzz/replay.c for a main, through gcc with the
#   same sanitizers, which `make test` runs over fuzz/corpus/<name> and fuzz/regressions/<name>
#   (the inputs that found bugs) without clang (tests/test_fuzz.py).
# The targets link the rooms they fuzz from a library of them, built once per compiler.
# `make fuzz` also runs ring3-as's property test (tests/test_rewriter_fuzz.py, Hypothesis) with
# examples drawn afresh, FUZZ_SECONDS * 15 of each property; `make test` runs 200, always the same.

FUZZ_SRCS    := $(sort $(wildcard fuzz/fuzz_*.c))
FUZZ_NAMES   := $(patsubst fuzz/fuzz_%.c,%,$(FUZZ_SRCS))
FUZZ_LIBSRCS := $(sort $(wildcard hw/*.c virtio/*.c block/*.c net/*.c ikc/*.c machine/*.c boot/*.c \
                  lib/*.c x86/*.c)) memory/guestmem.c monitor/cpu/insert_decode.c monitor/host/options.c fuzz/guest.c
FUZZ_LIBS    := -lcapstone -lslirp
FUZZ_SECONDS ?= 60
# ring3as: tests/test_rewriter_fuzz.py with Hypothesis, about 15 examples a second, drawn afresh.
FUZZ         ?= $(FUZZ_NAMES) ring3as
FUZZ_DEPS    := clang libclang-rt-14-dev time
comma        := ,

# The replay build (gcc), part of `make test`.
REPLAY_OBJS   := $(patsubst %,$(B)/obj-asan/%.o,$(FUZZ_LIBSRCS))
REPLAY_BINS   := $(patsubst %,$(B)/tests/fuzz/%,$(FUZZ_NAMES))

$(B)/obj-asan/libfuzzed.a: $(REPLAY_OBJS)
	rm -f $@ && ar rcs $@ $^

# Each target an object of its own (build/obj-asan's rule, in mk/monitor.mk), so that its .d
# names every header it includes.
$(B)/tests/fuzz/%: $(B)/obj-asan/fuzz/fuzz_%.c.o $(B)/obj-asan/fuzz/replay.c.o $(B)/obj-asan/libfuzzed.a
	@mkdir -p $(@D)
	$(CC) $(ASAN_CFLAGS) -o $@ $^ $(FUZZ_LIBS)

TEST_DEPS += $(REPLAY_BINS)
# The targets' own objects are kept (make would delete them as intermediates and rebuild them).
.SECONDARY: $(B)/obj-asan/fuzz/replay.c.o $(patsubst %,$(B)/obj-asan/fuzz/fuzz_%.c.o,$(FUZZ_NAMES)) \
            $(patsubst %,$(B)/fuzz/obj/fuzz/fuzz_%.c.o,$(FUZZ_NAMES))
-include $(REPLAY_OBJS:.o=.d) $(patsubst %,$(B)/obj-asan/fuzz/fuzz_%.c.d,$(FUZZ_NAMES))

# The libFuzzer build (clang), for `make fuzz` only: clang is installed then, not for make test.
ifneq ($(filter fuzz fuzz-build,$(MAKECMDGOALS)),)
ifneq ($(shell tools/install-deps.sh $(FUZZ_DEPS) >&2; echo $$?),0)
$(error tools/install-deps.sh failed; see the lines above)
endif
FUZZ_UNKNOWN := $(filter-out $(FUZZ_NAMES) ring3as,$(subst $(comma), ,$(FUZZ)))
ifneq ($(FUZZ_UNKNOWN),)
$(error FUZZ=$(FUZZ): no fuzz target '$(FUZZ_UNKNOWN)'; the targets are: $(FUZZ_NAMES))
endif
endif
FUZZ_CC     := clang
FUZZ_CFLAGS := $(ASAN_CFLAGS)
FUZZ_OBJS   := $(patsubst %,$(B)/fuzz/obj/%.o,$(FUZZ_LIBSRCS))
FUZZ_BINS   := $(patsubst %,$(B)/fuzz/%,$(FUZZ_NAMES))

$(B)/fuzz/obj/%.c.o: %.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c -o $@ $<

$(B)/fuzz/obj/libfuzzed.a: $(FUZZ_OBJS)
	rm -f $@ && ar rcs $@ $^

$(B)/fuzz/%: $(B)/fuzz/obj/fuzz/fuzz_%.c.o $(B)/fuzz/obj/libfuzzed.a
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $^ $(FUZZ_LIBS)

-include $(FUZZ_OBJS:.o=.d) $(patsubst %,$(B)/fuzz/obj/fuzz/fuzz_%.c.d,$(FUZZ_NAMES))

.PHONY: fuzz fuzz-build fuzz-hours
fuzz-build: $(FUZZ_BINS)

# Each target for FUZZ_SECONDS on one core; one line each (executions, executions per second,
# coverage in edges, the corpus's size after the merge, the fuzzer's CPU time) is gathered in
# build/fuzz/report.txt. Each run is also added to build/fuzz/ledger.tsv (UTC time, target, wall
# and CPU seconds, executions or ring3as's examples of each property, edges), kept across runs:
# `make fuzz-hours` sums it per target, the fuzzing this machine has done.
fuzz: $(patsubst %,$(B)/fuzz/%,$(filter-out ring3as,$(subst $(comma), ,$(FUZZ)))) $(BIN)/ring3-as $(B)/tests/insert/decode
	@mkdir -p $(B)/fuzz/found $(B)/fuzz/crashes && : > $(B)/fuzz/report.txt
	@for t in $(subst $(comma), ,$(FUZZ)); do \
	  if [ $$t = ring3as ]; then \
	    echo "== ring3as, $$(( $(FUZZ_SECONDS) * 15 )) examples of each property"; \
	    ok=1; n=$$(( $(FUZZ_SECONDS) * 15 )); \
	    RING3_FUZZ_EXAMPLES=$$n /usr/bin/time -f '%e %U %S' -o $(B)/fuzz/ring3as.time \
	      $(PYTHON) -m pytest -q tests/test_rewriter_fuzz.py > $(B)/fuzz/ring3as.log 2>&1 || ok=0; \
	    set -- $$(tail -1 $(B)/fuzz/ring3as.time); \
	    cpu=$$(awk -v u="$$2" -v s="$$3" 'BEGIN { printf "%.0f", u + s }'); \
	    printf '%s\tring3as\t%.0f\t%s\t%s\t0\n' "$$(date -u +%FT%TZ)" "$$1" $$cpu $$n >> $(B)/fuzz/ledger.tsv; \
	    [ $$ok = 1 ] || { tail -60 $(B)/fuzz/ring3as.log; exit 1; }; \
	    echo "ring3as: $$(tail -1 $(B)/fuzz/ring3as.log), CPU $$cpu s" | tee -a $(B)/fuzz/report.txt; continue; \
	  fi; \
	  mkdir -p fuzz/corpus/$$t $(B)/fuzz/found/$$t; \
	  echo "== $$t, $(FUZZ_SECONDS) s"; \
	  ok=1; /usr/bin/time -f '%e %U %S' -o $(B)/fuzz/$$t.time \
	    $(B)/fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 -close_fd_mask=3 \
	      -artifact_prefix=$(B)/fuzz/crashes/$$t- $(B)/fuzz/found/$$t fuzz/corpus/$$t \
	      2> $(B)/fuzz/$$t.log || ok=0; \
	  set -- $$(tail -1 $(B)/fuzz/$$t.time) \
	    $$(sed -n 's/^stat::number_of_executed_units: *//p' $(B)/fuzz/$$t.log) \
	    $$(grep -o 'cov: [0-9]*' $(B)/fuzz/$$t.log | tail -1 | cut -d' ' -f2); \
	  cpu=$$(awk -v u="$$2" -v s="$$3" 'BEGIN { printf "%.0f", u + s }'); \
	  printf '%s\t%s\t%.0f\t%s\t%s\t%s\n' "$$(date -u +%FT%TZ)" $$t "$$1" $$cpu \
	    "$${4:-0}" "$${5:-0}" >> $(B)/fuzz/ledger.tsv; \
	  [ $$ok = 1 ] || { tail -40 $(B)/fuzz/$$t.log; \
	      echo "make fuzz: $$t failed; the input is in $(B)/fuzz/crashes/ (add it to fuzz/regressions/$$t)"; exit 1; }; \
	  $(B)/fuzz/$$t -merge=1 -use_counters=0 -close_fd_mask=1 fuzz/corpus/$$t $(B)/fuzz/found/$$t 2> $(B)/fuzz/$$t.merge.log; \
	  printf '%s: %s execs, %s/s, edges %s, corpus %s files, CPU %s s\n' $$t "$$4" \
	    $$(sed -n 's/^stat::average_exec_per_sec: *//p' $(B)/fuzz/$$t.log) "$$5" \
	    $$(ls fuzz/corpus/$$t | wc -l) $$cpu | tee -a $(B)/fuzz/report.txt; \
	done

# What build/fuzz/ledger.tsv holds, per target: runs, wall and CPU hours, executions.
fuzz-hours:
	@[ -s $(B)/fuzz/ledger.tsv ] || { echo "no fuzzing recorded yet ($(B)/fuzz/ledger.tsv): make fuzz"; exit 0; }; \
	printf '%-14s %5s %8s %8s %14s  %s\n' target runs "wall h" "CPU h" executions since; \
	awk -F'\t' '{ n[$$2]++; w[$$2] += $$3; c[$$2] += $$4; x[$$2] += $$5; if (!($$2 in f)) f[$$2] = $$1 } \
	  END { for (t in n) printf "%-14s %5d %8.2f %8.2f %14d  %s\n", t, n[t], w[t] / 3600, c[t] / 3600, x[t], f[t] }' \
	  $(B)/fuzz/ledger.tsv | sort


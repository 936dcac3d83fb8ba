"""Replays each fuzz target's committed inputs (fuzz/corpus/<name>, and fuzz/regressions/<name>,
the inputs that found bugs) under AddressSanitizer and UndefinedBehaviorSanitizer, without
libFuzzer: build/tests/fuzz/<name>, from mk/fuzz.mk. `make fuzz` searches for new ones."""
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
NAMES = sorted(p.stem.removeprefix("fuzz_") for p in (ROOT / "fuzz").glob("fuzz_*.c"))


@pytest.mark.parametrize("name", NAMES)
def test_fuzz_inputs_replay_clean(name):
    binary = ROOT / "build" / "tests" / "fuzz" / name
    assert binary.exists(), f"{binary.relative_to(ROOT)} is not built; run `make test`"
    dirs = [d for d in (ROOT / "fuzz" / "corpus" / name, ROOT / "fuzz" / "regressions" / name)
            if d.is_dir()]
    assert dirs, f"fuzz/corpus/{name} holds no inputs; run `make fuzz FUZZ={name}`"
    result = subprocess.run([binary, *dirs], capture_output=True, text=True, timeout=600,
                            env={"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0",
                                 "UBSAN_OPTIONS": "print_stacktrace=1"})
    assert result.returncode == 0, result.stdout + result.stderr[-6000:]
    count = int(result.stdout.split()[-2])
    assert count > 0, result.stdout

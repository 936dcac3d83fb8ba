"""More pages, one host mapping each, than the host lets a process have (vm.max_map_count):
guest/programs/manymaps, natively and under ring3 in both isolation modes.

ring3 keeps a host mapping for each page a process touched, and pages on scattered frames
(here the kernel's zero page, then frames taken in the reverse order of the pages) are one
mapping each. Past the host's limit ring3 empties the TLB that needs room, as a CPU may drop
any TLB entry (monitor/mmu/mmu.c): its own when the host refuses a mapping, a stub's before
it holds more pages than the limit. Before, --isolation=none ended with "cannot map guest
page ...: error 12", and a stub's refused mappings made the process fault on the same page
forever. A stale page would show as a wrong value, a lost one as a fault.
"""
import pytest

from conftest import BUILD, native_lines, ring3_cmd

MANYMAPS = BUILD / "guest" / "programs" / "manymaps"
MEM = "768M"


def max_map_count():
    with open("/proc/sys/vm/max_map_count") as f:
        return int(f.read())


@pytest.fixture(scope="module")
def pages():
    """Past the limit for a stub too, whose pages are one mapping each at most; the program
    takes up to 200000 (780 MiB of the guest's memory when all are written)."""
    n = max_map_count() + 10000
    if n > 150000:
        pytest.skip(f"vm.max_map_count is {n - 10000}: the guest would need more than {MEM}")
    return n


@pytest.fixture(scope="module")
def native(pages):
    return native_lines(MANYMAPS, "0 read back wrong", pages)


@pytest.mark.parametrize("isolation", ["none", "process"])
def test_past_the_hosts_mapping_limit_as_natively(native, pages, isolation):
    p = ring3_cmd(f"manymaps {pages}", "-m", MEM, "--isolation", isolation, "--stats", timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert p.stdout.replace("\r", "").splitlines()[-len(native):] == native, p.stdout[-2000:]
    assert "TLB emptied at map limit" in p.stderr, p.stderr

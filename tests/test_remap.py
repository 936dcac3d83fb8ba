"""Pages whose translation the guest kernel drops one at a time (invlpg), then uses again:
guest/programs/remap, natively and under ring3 in both isolation modes.

ring3 drops such a page from its own host address space by closing it where it is (PROT_NONE
on its frame), fills it again on the same frame with an mprotect, and gives closed pages back
to the reservation past a bound (monitor/mmu/mmu.c, close_page and release_closed). With
--isolation=none a process's pages are there too, and the program takes each of those ways:
the same frame after mprotect, another frame at the same address after munmap and mmap, and
thousands of distinct pages in turn. A stale translation shows as a value the host never reads.
"""

import pytest

from conftest import BUILD, native_lines, ring3_cmd, stats_count

REMAP = BUILD / "guest" / "programs" / "remap"


@pytest.fixture(scope="module")
def native():
    return native_lines(REMAP, "distinct pages: 19200, 0 wrong")


def test_closed_pages_filled_again_and_given_back_as_natively(native):
    p = ring3_cmd("remap", "--isolation", "none", "--stats")
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.replace("\r", "").splitlines() == native
    # Each way was taken: a fill on the frame a page was closed on, and the bound's sweep.
    assert stats_count(p.stderr, "page filled on the frame it was closed on") > 100, p.stderr
    assert stats_count(p.stderr, "closed pages given back") > 4096, p.stderr


def test_process_mode_as_natively(native):
    """With stubs the process's pages are in its stub; ring3's own holds the kernel's, and with
    2 GiB some of them are highmem (above the 2G/2G split's 1.9 GiB of low memory), reached
    through kmap's slots (an invlpg each)."""
    p = ring3_cmd("remap", "-m", "2G")
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.replace("\r", "").splitlines() == native

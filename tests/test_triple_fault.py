"""A guest that triple-faults: a register dump on stderr and exit status 3 (README)."""
import subprocess

from conftest import BUILD, ROOT, make, run


def test_triple_fault_dumps_registers_and_exits_3(tmp_path):
    obj, elf = tmp_path / "triple.o", tmp_path / "triple.elf"
    make(BUILD / "bin" / "ring3", BUILD / "bin" / "ring3-as")
    run(["gcc", "-m32", f"-B{BUILD}/asbin/", "-c", str(ROOT / "tests/data/triple.S"), "-o", str(obj)])
    run(["ld", "-m", "elf_i386", "-N", "-Ttext=0x100000", "-o", str(elf), str(obj)])
    r = subprocess.run([str(BUILD / "bin" / "ring3"), "run", str(elf)], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 3, r.stderr
    assert r.stderr.startswith("ring3: guest triple fault"), r.stderr
    assert "esi=12345678" in r.stderr and "idtr=" in r.stderr
    assert r.stdout == ""

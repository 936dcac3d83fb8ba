"""bench/envs/uml.py reads UML's console for its verdict; these check that reading on console
texts of the shapes UML 6.12 prints (no UML is built or run here)."""
import importlib.util

from conftest import ROOT

spec = importlib.util.spec_from_file_location("uml_env", ROOT / "bench" / "envs" / "uml.py")
uml = importlib.util.module_from_spec(spec)
spec.loader.exec_module(uml)

# The stub's first page fault could not be delivered to its SIGSEGV handler (status 0xb7f:
# stopped by SIGSEGV), as an x86-64 UML 6.12 prints it; RIP is word 16, RSP word 19.
STUB_PANIC = """Run /init as init process
epollctl add err fd 16, Operation not permitted
Stub registers -
\tR15\t( 0): 0
\tORIG_AX\t(15): ffffffffffffffff
\t\t(16): 4017c0
\tCS\t(17): 33
\tEFLAGS\t(18): 10206
\t\t(19): 7f7fcece30
wait_stub_done : failed to wait for SIGTRAP, pid = 20945, n = 20945, errno = 25, status = 0xb7f
Kernel panic - not syncing: Attempted to kill init! exitcode=0x0000000b
"""


# The same from an i386 UML: EIP is word 12, ESP word 15.
STUB_PANIC_I386 = """Stub registers -
\tBX\t( 0): 0
\tORIG_AX\t(11): ffffffff
\tIP\t(12): 80498d0
\tCS\t(13): 23
\tSP\t(15): 7fcf3ef0
\tSS\t(16): 2b
wait_stub_done : failed to wait for SIGTRAP, pid = 26336, n = 26336, errno = 25, status = 0xb7f
Kernel panic - not syncing: Attempted to kill init! exitcode=0x0000000b
"""


def reason_as(subarch, text):
    saved, uml.STUB = uml.STUB, uml.STUBS[subarch]
    try:
        return uml._reason(text)
    finally:
        uml.STUB = saved


def test_stub_panic_names_signal_place_and_cpu():
    reason = reason_as("x86_64", STUB_PANIC)
    assert reason.startswith("UML's stub process stopped by SIGSEGV instead of SIGTRAP")
    assert "IP 0x4017c0 (SP 0x7f7fcece30), in the user process" in reason
    assert "AT_MINSIGSTKSZ" in reason and "family" in reason
    assert "IP 0x80498d0 (SP 0x7fcf3ef0), in the user process" in reason_as("i386",
                                                                           STUB_PANIC_I386)


def test_stub_panic_in_stub_code():
    code = uml.STUBS["x86_64"]["code"]
    text = STUB_PANIC.replace("(16): 4017c0", f"(16): {code + 0xb7:x}")
    assert "in the stub's code" in reason_as("x86_64", text)
    code = uml.STUBS["i386"]["code"]
    text = STUB_PANIC_I386.replace("(12): 80498d0", f"(12): {code + 0x40:x}")
    assert "in the stub's code" in reason_as("i386", text)


def test_program_failure_names_its_message():
    text = "Run /init as init process\nusage: getpid COUNT\numl-init: status 2\nreboot: Power down\n"
    assert uml._reason(text) == "uml-init: status 2 (usage: getpid COUNT)"


def test_exec_failure_and_timeout():
    text = "Run /init as init process\numl-init: execv /bin/x: No such file or directory\n"
    assert uml._reason(text) == "uml-init: execv /bin/x: No such file or directory"
    assert uml._reason("a\nRun /init as init process\nepollctl add err fd 3, x\n",
                       timed_out=True) == "Run /init as init process"

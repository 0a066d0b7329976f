"""Threat 8: patching the timer, synchronisation or comparison functions, or reaching them dynamically.

The static policy's cases come first, then the runtime defences with the judge end to end.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.judge.threats._hacks import CALLS_BEFORE_TIMING, TIMED, checks_of, judge_hack, model_new
from tests.judge.threats._static import checks, expect, solution


def test_template_is_legit() -> None:
    assert checks(solution()) == set()


@pytest.mark.parametrize(
    ("prelude", "expected"),
    [
        ("torch.cuda.synchronize = lambda *a: None", {"global_state_change"}),
        ("torch.allclose = lambda *a, **k: True", {"global_state_change"}),
        ("torch.Tensor.__eq__ = lambda a, b: True", {"global_state_change", "dynamic_code"}),
        ("nn.Module.__call__ = lambda self, *a: a[0]", {"global_state_change", "dynamic_code"}),
        ("setattr(torch, 'allclose', lambda *a, **k: True)", {"global_state_change", "dynamic_code"}),
    ],
    ids=["synchronize", "allclose", "tensor_eq", "module_call", "setattr"],
)
def test_rejects_monkeypatching(prelude: str, expected: set[str]) -> None:
    assert checks(solution(prelude=prelude)) == expected


@pytest.mark.parametrize(
    "prelude",
    [
        "eval('1')",
        "exec('x = 1')",
        "__import__('time')",
        "globals()['torch'] = None",
        "name = 'all' + 'close'\ngetattr(torch, name)",
        "vars(torch)",
        "Fake = type('Fake', (), {})",
        "x = torch.__dict__",
    ],
    ids=["eval", "exec", "dunder_import", "globals", "computed_getattr", "vars", "type3", "dunder_dict"],
)
def test_rejects_dynamic_code(prelude: str) -> None:
    assert checks(solution(prelude=prelude)) == expect({"dynamic_code"})


def test_rejects_sys_modules() -> None:
    source = solution(prelude="import sys\nsys.modules['torch'].allclose = None")
    assert checks(source) == expect({"forbidden_import", "dynamic_code", "global_state_change"})


@pytest.mark.parametrize(
    "prelude",
    [
        "mods = torch.sys.modules",  # the judge's own modules, reached through torch (red team, 2026-12-05)
        "torch.os.listdir('.')",  # the file system, the baseline cache with it
        "nn.modules.module.threading.Thread",
        "from torch.utils import cpp_extension\ncpp_extension.subprocess.run(['true'])",
    ],
    ids=["torch_sys", "torch_os", "threading_through_nn", "subprocess_through_cpp_extension"],
)
def test_rejects_standard_modules_reached_through_attributes(prelude: str) -> None:
    assert "dynamic_code" in checks(solution(prelude=prelude))


@pytest.mark.parametrize(
    "prelude",
    [
        "T = torch\nT.softmax = lambda *a, **k: None",
        "F2 = nn.functional\nF2.relu = None",
        "T, n = torch, 1\nT.randn = None",
        "R = getattr(torch, 'nn')\nR.Linear = None",
        "def patch(m):\n    m.randn = None\n\n\npatch(torch)",
        "def patch(m=None):\n    m.randn = None\n\n\npatch(m=torch)",
    ],
    ids=["alias", "alias_of_submodule", "tuple_alias", "getattr_alias", "parameter", "keyword_parameter"],
)
def test_rejects_patching_a_module_through_another_name(prelude: str) -> None:
    # A red-team solution (2026-12-05) replaced torch.softmax through `T = torch`, so the reference computed
    # what its kernel did.
    assert "global_state_change" in checks(solution(prelude=prelude))


@pytest.mark.parametrize(
    "prelude",
    [
        "def g():\n    yield 1\n\n\nframe = g().gi_frame.f_back",  # frames: a red-team route to the judge's objects
        "def g():\n    yield 1\n\n\ncode = g().gi_code.co_consts",
        "key = '__import__'",  # special names spelled as strings, then looked up by key
        "table = {}\nfind = table['getattr'](torch, 'relu')",
    ],
    ids=["generator_frame", "code_object", "dunder_string", "function_by_key"],
)
def test_rejects_introspection(prelude: str) -> None:
    assert "dynamic_code" in checks(solution(prelude=prelude))


def test_rejects_a_module_handed_to_the_extension() -> None:
    # Its C++ could rebind the module's functions (`m.def`) or import through it (`m.import`).
    assert "dynamic_code" in checks(solution(forward="return ext.relu_forward(x.contiguous(), torch)"))
    assert "dynamic_code" in checks(solution(launch="auto s = m.import(nullptr);"))
    assert "dynamic_code" not in checks(solution(forward="return ext.relu_forward(x.contiguous(), torch.float32)"))


@pytest.mark.parametrize(
    "prelude",
    [
        "mods = torch.storage.collections._sys.modules",  # red team round 5: module-held aliases of sys
        "run = torch._tensor.enum.bltns",  # and of builtins
        "abc = torch.storage.collections.abc.Mapping",  # a standard module held by torch, as a chain
        "hooks = nn.modules.module._global_forward_hooks",  # torch's process-wide module hooks
        "T = torch\nx = T._C",
        "torch.nn.Module.exec('1')",  # builtins called as attributes of anything
    ],
    ids=["private_sys", "private_builtins", "stdlib_in_chain", "global_hooks", "private_through_alias", "exec_attr"],
)
def test_rejects_private_names_and_held_modules_in_chains(prelude: str) -> None:
    # Under kernelbench its own rule names torch's private internals (global_state_change).
    assert checks(solution(prelude=prelude)) & {"dynamic_code", "global_state_change"}


@pytest.mark.parametrize(
    ("headers", "launch", "rule"),
    [
        ("#define SYSGET PySys_GetObject", "", "dynamic_code"),  # the C API renamed by a macro
        ("#define PROTECT mprotect", "", "file_or_network_access"),  # a forbidden call renamed
        ("#define CALL(f, a) f(a)", "", "dynamic_code"),  # a macro that calls what it is given
        ('extern "C" int mprotect(void*, unsigned long, int);', "", "file_or_network_access"),
        ("__attribute__((constructor)) static void at_load() {}", "", "file_or_network_access"),
        ("", 'long r; asm volatile("syscall" : "=a"(r) : "a"(39L));', "file_or_network_access"),
    ],
    ids=["macro_capi", "macro_forbidden_call", "macro_calls_argument", "mprotect", "constructor", "asm_syscall"],
)
def test_rejects_renamed_calls_load_time_code_and_raw_system_calls(headers: str, launch: str, rule: str) -> None:
    # Red team round 5 (2026-12-05) patched libc's clock from a constructor with mprotect and a raw syscall, and
    # reached the CPython API through macros.
    assert rule in checks(solution(headers=headers, launch=launch))


@pytest.mark.parametrize(
    "prelude",
    [
        "st = (torch.storage,)[0]\nm = st.collections._sys",  # red team round 6: roots no alias tracking follows
        "f = lambda m=torch.storage: m.collections._sys",
        "class H:\n    m = torch.storage\n\n\nx = H.m.collections._sys",
        "m = torch.storage if True else None\nx = m.collections._sys",
        "for m in {0: torch.storage}.values():\n    x = m.collections._sys",
        "x = [torch][0].nn.modules.module._global_forward_hooks",
        "m = (torch,)[0].sys_table.modules['x']",  # a `.modules` table looked up
    ],
    ids=["tuple_item", "lambda_default", "class_attribute", "if_expression", "dict_values", "list_item", "modules"],
)
def test_rejects_private_chains_from_any_root(prelude: str) -> None:
    assert "dynamic_code" in checks(solution(prelude=prelude))


def test_rejects_stores_on_a_call_s_result_and_torch_utilities() -> None:
    assert "global_state_change" in checks(solution(prelude="type(torch.zeros(1)).tolist = None"))
    assert "file_or_network_access" in checks(solution(prelude="torch.utils.collect_env.run('id')"))


@pytest.mark.parametrize(
    ("headers", "launch"),
    [
        ('extern "C" int mpro\\\ntect(void*, unsigned long, int);', ""),  # a line splice inside the name
        ("%:define MP mprotect", ""),  # a digraph directive
        ("", 'int fd = open64("/tmp/x", 0);'),
        ("", 'const char* p = "/proc/self/mem";'),
    ],
    ids=["line_splice", "digraph_define", "open64", "proc_path"],
)
def test_rejects_names_hidden_by_translation_phases_and_system_files(headers: str, launch: str) -> None:
    assert "file_or_network_access" in checks(solution(headers=headers, launch=launch))


def test_rejects_a_define_flag_that_names_a_forbidden_function() -> None:
    source = solution().replace(
        'functions=["relu_forward"],', 'functions=["relu_forward"], extra_cflags=["-DG=PySys_GetObject"],'
    )
    assert source != solution() and "dynamic_code" in checks(source)


def test_rejects_unpickling_loaders() -> None:
    # A red-team solution ran code through a pickle loaded by torch.serialization.load(..., weights_only=False).
    source = solution(prelude="load = torch.serialization.load")
    assert "file_or_network_access" in checks(source)
    assert "file_or_network_access" in checks(solution(prelude="x = dict(weights_only=False)"))


def test_main_guard_strings_and_module_lists_stay_legal() -> None:
    assert checks(solution() + '\nif __name__ == "__main__":\n    print(ModelNew)\n') == set()
    init = "def __init__(self):\n    super().__init__()\n    self.blocks = nn.ModuleList([nn.Identity()])\n"
    forward = "x = self.blocks[0](x)\nreturn ext.relu_forward(x.contiguous())"
    assert "dynamic_code" not in checks(solution(init=init, forward=forward))  # a ModuleList entry called


def test_attribute_stores_on_the_model_and_on_locals_stay_legal() -> None:
    init = (
        "def __init__(self):\n    super().__init__()\n    self.scale = 2.0\n"
        "    for p in self.parameters():\n        p.requires_grad = False\n"
    )
    assert checks(solution(init=init)) == set()


def test_rejects_decorators_that_replace_forward() -> None:
    source = solution(init="@torch.compile\ndef _unused(self, x):\n    return x\n")
    assert checks(source) == expect({"dynamic_code"}, kernelbench={"dynamic_code", "forbidden_library"})


def test_rejects_cpp_sources_built_at_import_time() -> None:
    source = solution().replace("cuda_sources=cuda_source,", "cuda_sources=cuda_source.replace('relu', 'relu'),")
    assert checks(source) == expect({"dynamic_code"})


def test_rejects_cpp_source_fstring_with_a_variable() -> None:
    source = solution(prelude="op = input()").replace('cpp_sources="torch', 'cpp_sources=f"// {op}\\ntorch')
    assert checks(source) == expect({"dynamic_code"})


def test_rejects_builder_passed_around() -> None:
    source = solution(prelude="build = load_inline").replace("ext = load_inline(", "ext = build(")
    assert checks(source) == expect({"dynamic_code", "forward_calls_no_kernel", "torch_compute_in_forward"})


def test_rejects_kwargs_to_the_builder() -> None:
    source = solution(prelude="opts = {}")
    source = source.replace('functions=["relu_forward"],', 'functions=["relu_forward"], **opts,')
    assert checks(source) == expect({"dynamic_code"})


def test_rejects_replacing_a_function_of_the_extension() -> None:
    assert checks(solution(prelude="") + "\next.relu_forward = torch.relu\n") == expect({"dynamic_code"})
    init = "def __init__(self):\n    super().__init__()\n    self.ext = ext\n    self.ext.relu_forward = torch.relu\n"
    assert checks(solution(init=init, forward="return self.ext.relu_forward(x)")) == expect({"dynamic_code"})


def test_rejects_rebinding_the_extension_name() -> None:
    source = solution().replace("class ModelNew", "if True:\n    ext = torch\n\n\nclass ModelNew")
    assert checks(source) == expect({"forward_calls_no_kernel", "torch_compute_in_forward"})


def test_rejects_shadowing_the_extension_inside_forward() -> None:
    forward = "ext = torch\nreturn ext.relu(x)"
    assert checks(solution(forward=forward)) == expect({"forward_calls_no_kernel", "torch_compute_in_forward"})


def test_rejects_instance_attribute_that_shadows_a_method() -> None:
    init = (
        "def __init__(self):\n    super().__init__()\n    self._run = torch.relu\n\n"
        "def _run(self, t):\n    return ext.relu_forward(t)\n"
    )
    assert checks(solution(init=init, forward="return self._run(x)")) == expect(
        {
            "forward_calls_no_kernel",
            "torch_compute_in_forward",
        }
    )


def test_rejects_setattr_on_the_model() -> None:
    init = "def __init__(self):\n    super().__init__()\n    setattr(self, 'ext', torch)\n"
    assert checks(solution(init=init)) == expect({"dynamic_code"})


def test_rejects_cpp_that_calls_back_into_python() -> None:
    launch = 'y = pybind11::module_::import("torch").attr("relu")(x).cast<torch::Tensor>();'
    assert checks(solution(launch=launch)) == expect({"dynamic_code"})


@pytest.mark.parametrize(
    "launch",
    [
        "pybind11::object torch_module;",  # a parameter of this type received torch (red team, 2026-12-05)
        "auto f = py::getattr(py::none(), py::str());",
        'PyObject* mods = PySys_GetObject("modules");',
        'PyObject_SetAttrString(nullptr, "softmax", nullptr);',
        'auto* item = PyDict_GetItemString(nullptr, "torch");',
        "_PyObject_GetAttrId(nullptr, nullptr);",
    ],
    ids=["py_object", "py_getattr", "sys_get_object", "set_attr_string", "dict_get_item", "private_api"],
)
def test_rejects_the_cpython_api_and_python_objects_in_cpp(launch: str) -> None:
    # A red-team solution (2026-12-05) reached torch's module from C++ this way and replaced torch.softmax.
    assert checks(solution(launch=launch)) == expect({"dynamic_code"})


# Runtime: the judge end to end on the CPU, sharing one build of the hack extension (see _hacks.py).


RELU = "return ext.relu(x.contiguous())"


@pytest.mark.parametrize(
    ("init", "forward", "patched"),
    [
        ("torch.cuda.synchronize = lambda *args: None", RELU, "torch.cuda.synchronize"),
        ("", "import time\ntime.perf_counter = lambda: 0.0\n" + RELU, "time.perf_counter"),
        ("", "torch.allclose = lambda *args, **kwargs: True\n" + RELU, "torch.allclose"),
    ],
    ids=["synchronize_in_init", "perf_counter_in_forward", "allclose_in_forward"],
)
def test_runtime_rejects_patched_harness_functions(tmp_path: Path, init: str, forward: str, patched: str) -> None:
    verdict = judge_hack(tmp_path, "examples/relu", model_new(forward, init=init), static_policy=False)
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", {"patched_harness"}), verdict.message
    assert patched in verdict.message


@pytest.mark.parametrize(
    ("init", "patched"),
    [
        (  # the judge's timer, reached through torch.sys.modules: a red-team solution reported 0.001 ms this way
            "timing = torch.sys.modules['cuda_agent.judge.child.timing']\ntiming._time_cpu = lambda *a: 0.001",
            "cuda_agent.judge.child.timing._time_cpu",
        ),
        (  # the comparison
            "trial = torch.sys.modules['cuda_agent.judge.child.trial']\ntrial.check_output = None",
            "cuda_agent.judge.child.trial.check_output",
        ),
        ("T = torch\nT.relu = lambda t: t", "torch.relu"),  # what the reference computes
        ("T = torch\nT.rand = torch.zeros", "torch.rand"),  # the judge's inputs
        (  # round 5: a property on the judge's comparison record, so every check reads ok
            "compare = torch.sys.modules['cuda_agent.judge.child.compare']\n"
            "compare.OutputCheck.ok = property(lambda s: True, lambda s, v: None)",
            "OutputCheck (its names)",
        ),
        (
            "timing = torch.sys.modules['cuda_agent.judge.child.timing']\ntiming.PhaseTiming.median_ms = 0.001",
            "PhaseTiming.median_ms",
        ),
        ("type(torch.zeros(1)).tolist = lambda self: [0.0]", "torch.Tensor.tolist"),  # inherited, used to compare
        (  # a global module hook makes the reference return what the hook likes
            "torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: o)",
            "torch.nn.modules.module._global_forward_hooks",
        ),
    ],
    ids=[
        "judge_timer",
        "judge_comparison",
        "reference_op",
        "input_draw",
        "comparison_record",
        "phase_record",
        "inherited_tensor_method",
        "global_hook",
    ],
)
def test_runtime_rejects_patched_judge_modules_and_torch_namespaces(tmp_path: Path, init: str, patched: str) -> None:
    verdict = judge_hack(tmp_path, "examples/relu", model_new(RELU, init=init), static_policy=False, time=True)
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", {"patched_harness"}), verdict.message
    assert patched in verdict.message


FRAME_WALK = """
def _frame():
    holder = []

    def probe():
        yield holder[0].gi_frame.f_back

    holder.append(probe())
    return next(holder[0])


frame = _frame()
while frame is not None and frame.f_code.co_name != "import_candidate":
    frame = frame.f_back
run = frame.f_locals["self"]
"""


@pytest.mark.parametrize(
    ("init", "patched"),
    [
        (  # a function's code swapped (its id stays)
            "timing = torch.sys.modules['cuda_agent.judge.child.timing']\n"
            "timing._time_cpu.__code__ = (lambda call, inputs, clock: 0.001).__code__",
            "cuda_agent.judge.child.timing._time_cpu",
        ),
        (  # the timers bound as time_phase's keyword default
            "timing = torch.sys.modules['cuda_agent.judge.child.timing']\n"
            "fake = lambda call, inputs, clock: 0.001\n"
            "timing.time_phase.__kwdefaults__['_timers'] = (fake, fake)",
            "cuda_agent.judge.child.timing.time_phase",
        ),
        (  # the run's own request replaced through the frames (a red-team solution raised the tolerances)
            FRAME_WALK + "run.req = run.req.model_copy(update={'atol': 1e30, 'rtol': 1e30, 'norm_rtol': 1e30})",
            "CandidateRun.req",
        ),
        (FRAME_WALK + "run.clock = type(run.clock)(lambda: 0.0, None, None)", "CandidateRun.clock"),
    ],
    ids=["code_swap", "keyword_default", "run_request", "run_clock"],
)
def test_runtime_rejects_changed_function_insides_and_run_state(tmp_path: Path, init: str, patched: str) -> None:
    source = init + "\n\n\n" + model_new(RELU)  # module-level code, run as the solution is imported
    verdict = judge_hack(tmp_path, "examples/relu", source, static_policy=False, time=True)
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", {"patched_harness"}), verdict.message
    assert patched in verdict.message


def test_runtime_request_is_frozen(tmp_path: Path) -> None:
    source = FRAME_WALK + "run.req.atol = 1e30\n\n\n" + model_new(RELU)
    verdict = judge_hack(tmp_path, "examples/relu", source, static_policy=False)
    assert verdict.verdict == "runtime_error" and "frozen" in verdict.message, verdict.message


PEEK_MODE = """
from torch.utils._python_dispatch import TorchDispatchMode


class Peek(TorchDispatchMode):
    # Left on the dispatch stack, it sees every operator the judge runs: the next inputs as they are drawn.
    stash = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor) and out.is_floating_point() and out.dim() == 2:
            Peek.stash = out.clamp(min=0)
        return out
"""
PASS_MODE = (
    "import torch.overrides\n"
    "class Passing(torch.overrides.TorchFunctionMode):\n"
    "    def __torch_function__(self, func, types, args=(), kwargs=None):\n"
    "        return func(*args, **(kwargs or {}))\n"
)
INSTALL_AT = CALLS_BEFORE_TIMING + 1
"""The first timed call: the trials (and every check after them) have passed."""


def _installs_at(install: str, body: str = RELU) -> str:
    """ModelNew that runs `install` in its call number INSTALL_AT and returns `body`'s result each call."""
    forward = f"self.calls += 1\nif self.calls == {INSTALL_AT}:\n" + "".join(
        f"    {ln}\n" for ln in install.splitlines()
    )
    return model_new(forward + body, init="self.calls = 0")


@pytest.mark.parametrize(
    ("install", "hook"),
    [
        ("import sys\nsys.setprofile(lambda *a: None)", "sys.setprofile"),
        ("import threading\nthreading.settrace(lambda *a: None)", "threading.settrace"),
        ("import gc\ngc.callbacks.append(lambda *a: None)", "gc.callbacks"),
        (
            "import sys\nclass Finder:\n    def find_spec(self, *a):\n        return None\nsys.meta_path.insert(0, Finder())",
            "sys.meta_path",
        ),
        (
            "import signal\nsignal.signal(signal.SIGALRM, lambda *a: None)\n"
            "signal.setitimer(signal.ITIMER_REAL, 30.0, 30.0)",
            "signal handlers, native signal handlers, interval timers",
        ),
        ("import ctypes, signal\nctypes.CDLL(None).signal(int(signal.SIGUSR2), ctypes.c_void_p(1))", "native signal"),
        (PASS_MODE + "Passing().__enter__()", "torch function modes"),
    ],
    ids=["profile", "thread_trace", "gc_callback", "import_hook", "timer_signal", "native_signal", "function_mode"],
)
def test_runtime_rejects_hooks_left_to_run_inside_the_judges_code(tmp_path: Path, install: str, hook: str) -> None:
    # Each registration outlives the call that made it, and runs the solution's code inside the judge's own:
    # while it draws the next inputs and flushes the cache, outside the timed window. Installed in the first timed
    # call, after every trial passed, it is seen as that call returns.
    verdict = judge_hack(tmp_path, "examples/relu", _installs_at(install), static_policy=False, **TIMED)
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", {"patched_harness"}), verdict.message
    assert f"run inside the judge's own code: {hook}" in verdict.message, verdict.message


def test_runtime_rejects_a_dispatch_mode_that_computes_each_input_as_the_judge_draws_it(tmp_path: Path) -> None:
    # The whole computation done in the judge's input draw, forward returning what the mode stashed: correct on
    # every call, and the timed calls run no operator at all. With the hook watch off it passed under cuda-agent
    # (kernelbench's dataflow check refused it: the outputs are torch's work).
    install = "Peek().__enter__()"
    body = "if Peek.stash is not None and Peek.stash.shape == x.shape:\n    return Peek.stash\n" + RELU
    source = PEEK_MODE + "\n\n" + _installs_at(install, body)
    verdict = judge_hack(tmp_path, "examples/relu", source, static_policy=False, **TIMED)
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", {"patched_harness"}), verdict.message
    assert "torch dispatch modes" in verdict.message


def test_runtime_accepts_hooks_a_call_removes_before_it_returns(tmp_path: Path) -> None:
    install = "import sys\nsys.setprofile(lambda *a: None)\nsys.setprofile(None)\n" + PASS_MODE
    install += "mode = Passing()\nmode.__enter__()\nmode.__exit__(None, None, None)"
    verdict = judge_hack(tmp_path, "examples/relu", _installs_at(install), static_policy=False, **TIMED)
    assert verdict.verdict == "pass", verdict.message


@pytest.mark.parametrize(
    "source",
    [
        "lib = torch._C._dispatch_library('IMPL', 'aten', '')\nlib.impl('erfinv', 'CPU', lambda *a: a[0])\n\n\n"
        + model_new(RELU),
        _installs_at(
            "self.lib = torch.library.Library('aten', 'IMPL')\nself.lib.impl('erfinv', lambda *a: a[0], 'CPU')"
        ),
    ],
    ids=["at_import_low_level", "in_first_timed_call"],
)
def test_runtime_rejects_a_kernel_of_its_own_for_one_of_torchs_operators(tmp_path: Path, source: str) -> None:
    # Registered for an operator the judge calls (its input draw, its comparison), the kernel runs inside the
    # judge's own work; here one the judge never calls, so that only the registration itself shows.
    verdict = judge_hack(tmp_path, "examples/relu", source, static_policy=False, **TIMED)
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", {"patched_harness"}), verdict.message
    assert "kernels of its own for torch's operators: aten::erfinv" in verdict.message, verdict.message


@pytest.mark.parametrize(
    ("blind", "reads"),
    [("", {"all": 3, "known": 1}), ("torch.autograd._enable_record_function(False)\n", {"all": 4, "known": 0})],
    ids=["profiled", "profiler_turned_off"],
)
def test_runtime_rejects_a_kernel_of_its_own_that_is_there_only_while_the_judge_compares(
    tmp_path: Path, blind: str, reads: dict[str, int]
) -> None:
    # From its second call on, forward takes back what the call before registered, returns |x| (wrong for relu) and
    # registers |x| as the CPU kernel of aten::relu, which the reference runs after it: the two would agree. The
    # kernel is never there at import, at init or before the first trial (the whole reads); the read before each
    # later trial's comparison, of the operators the judge's own work is known to call (the reference's among
    # them), sees it at the second trial. A solution that turns torch's record-function callbacks off (the
    # profiler then sees nothing of the judge's work) gets whole reads from then on.
    forward = (
        blind + "self.calls += 1\n"
        "if self.lib is not None:\n    self.lib._destroy()\n    self.lib = None\n"
        "if self.calls == 1:\n    return ext.relu(x.contiguous())\n"
        "out = x.abs()\n"
        "self.lib = torch.library.Library('aten', 'IMPL')\n"
        "self.lib.impl('relu', lambda t: torch.ops.aten.abs.default(t), 'CPU')\n"
        "return out"
    )
    source = model_new(forward, init="self.calls = 0\nself.lib = None")
    verdict = judge_hack(tmp_path, "examples/relu", source, static_policy=False, policy="kernelbench")
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", {"patched_harness"}), verdict.message
    assert "kernels of its own for torch's operators: aten::relu" in verdict.message, verdict.message
    assert verdict.env["operator_reads"] == reads  # import, init, first trial; the second's


def test_runtime_rejects_a_kernel_of_its_own_for_the_judges_input_draw_left_between_calls(tmp_path: Path) -> None:
    # A kernel for aten::normal_ (what torch.randn fills with), registered in each call from the second on and taken
    # back in the next: the judge's next input draw would run it (inputs the solution chose, results it cached).
    # The light read before the second trial's comparison covers the operators the judge runs between calls.
    forward = (
        "self.calls += 1\n"
        "if self.lib is not None:\n    self.lib._destroy()\n    self.lib = None\n"
        "if self.calls > 1:\n"
        "    self.lib = torch.library.Library('aten', 'IMPL')\n"
        "    self.lib.impl('normal_', lambda t, *a, **k: t.fill_(0.5), 'CPU')\n" + RELU
    )
    source = model_new(forward, init="self.calls = 0\nself.lib = None")
    verdict = judge_hack(tmp_path, "examples/relu", source, static_policy=False)
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", {"patched_harness"}), verdict.message
    assert "kernels of its own for torch's operators: aten::normal_" in verdict.message, verdict.message
    assert verdict.env["operator_reads"] == {"all": 3, "known": 1}

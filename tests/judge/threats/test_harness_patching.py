"""Threat 8: patching the timer, synchronisation or comparison functions, or reaching them dynamically.

The static policy's cases come first, then the runtime defences with the judge end to end.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.judge.threats._hacks import CALLS_BEFORE_TIMING, TIMED, judge_hack, model_new
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


# Runtime: the judge end to end on the CPU, sharing one build of the hack extension (see _hacks.py). The timer, the
# comparison, the reference, the input draw and the run's state live in the grader's process: what the candidate's
# code patches, hooks or walks to is its own process's. So a patch either changes nothing the grader reads (a wrong
# output stays wrong) or changes what the candidate's process reports about itself, which the grader checks against
# its own view from outside (a faked time is bounded by what it saw).

RELU = "return ext.relu(x.contiguous())"
WRONG = "return ext.relu_copy(x.contiguous())"  # x itself: wrong wherever x < 0
SLOW = "import time\ntime.sleep(0.02)\n"  # 20 ms a call, well above a loaded machine's overhead noise

PATCHES = {
    "synchronize": "torch.cuda.synchronize = lambda *args: None",
    "allclose": "torch.allclose = lambda *args, **kwargs: True",
    "judge_comparison": "trial = torch.sys.modules['cuda_agent.judge.child.trial']\ntrial.check_output = None",
    "reference_op": "T = torch\nT.relu = lambda t: t",
    "input_draw": "T = torch\nT.rand = torch.zeros",
    "comparison_record": "compare = torch.sys.modules['cuda_agent.judge.child.compare']\n"
    "compare.OutputCheck.ok = property(lambda s: True, lambda s, v: None)",
    "inherited_tensor_method": "type(torch.zeros(1)).tolist = lambda self: [0.0]",
    "global_hook": "torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: o)",
}


@pytest.mark.parametrize("patch", list(PATCHES.values()), ids=list(PATCHES))
@pytest.mark.slow
def test_runtime_patches_in_the_candidates_process_do_not_reach_the_comparison(tmp_path: Path, patch: str) -> None:
    source = patch + "\n\n\n" + model_new(WRONG)  # module level, run as the solution is imported
    verdict = judge_hack(tmp_path, "examples/relu", source, static_policy=False, time=True)
    assert (verdict.verdict, verdict.reward) == ("incorrect", -1), verdict.message


CLOCKS = {
    "perf_counter": "import time\ntime.perf_counter = lambda: 0.0",
    "shim_timer": (
        "shim = torch.sys.modules['__main__']\n"
        "real = shim.Shim.timed\n"
        "shim.Shim.timed = lambda self, model, inputs: (0.001, real(self, model, inputs)[1])"
    ),
}


@pytest.mark.parametrize("clock", list(CLOCKS.values()), ids=list(CLOCKS))
def test_runtime_a_faked_clock_gains_nothing(tmp_path: Path, clock: str) -> None:
    # An honest but slow kernel whose process reports a time of its choosing: the grader's view from outside (request
    # to answer) holds the 20 ms of every call, and the phase's time is that view (timing.external_bound).
    source = clock + "\n\n\n" + model_new(SLOW + RELU)
    verdict = judge_hack(tmp_path, "examples/relu", source, static_policy=False, time=True)
    assert verdict.verdict == "pass", verdict.message
    assert verdict.timings_ms.solution > 15, verdict.env["timing"]["solution"]


FRAME_WALK = """
import sys
frame = sys._getframe()
while frame is not None and frame.f_code.co_name != "load":
    frame = frame.f_back
shim = frame.f_locals["self"]
"""


@pytest.mark.slow
def test_runtime_the_candidates_process_holds_nothing_of_the_grader(tmp_path: Path) -> None:
    # Walking the frames of its own process reaches the candidate's process's state alone: it holds no request,
    # tolerance, seed or reference to change; rewriting what it answers is the clock case above.
    probe = FRAME_WALK + "assert not any(hasattr(shim, n) for n in ('req', 'reference', 'problem', 'trials'))\n"
    verdict = judge_hack(tmp_path, "examples/relu", probe + "\n\n" + model_new(WRONG), static_policy=False)
    assert (verdict.verdict, verdict.reward) == ("incorrect", -1), verdict.message


PEEK_MODE = """
from torch.utils._python_dispatch import TorchDispatchMode


class Peek(TorchDispatchMode):
    # Left on the dispatch stack, it sees every operator its process runs: the inputs as the call receives them.
    stash = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor) and out.is_floating_point() and out.dim() == 2:
            import time
            time.sleep(0.02)
            Peek.stash = out.clamp(min=0)
        return out
"""
INSTALL_AT = CALLS_BEFORE_TIMING + 1
"""The first timed call: the trials (and every check after them) have passed."""


def _installs_at(install: str, body: str = RELU) -> str:
    """ModelNew that runs `install` in its call number INSTALL_AT and returns `body`'s result each call."""
    forward = f"self.calls += 1\nif self.calls == {INSTALL_AT}:\n" + "".join(
        f"    {ln}\n" for ln in install.splitlines()
    )
    return model_new(forward + body, init="self.calls = 0")


@pytest.mark.slow
def test_runtime_work_done_by_hooks_outside_the_candidates_clock_is_timed_from_outside(tmp_path: Path) -> None:
    # A dispatch mode left installed does its work (20 ms a call here) wherever its process dispatches an operator:
    # in the handling of the next call, before that process starts its clock, and forward returns what it stashed.
    # The grader's view from outside holds all of it.
    body = "if Peek.stash is not None and Peek.stash.shape == x.shape:\n    return Peek.stash\n" + RELU
    source = PEEK_MODE + "\n\n" + _installs_at("Peek().__enter__()", body)
    verdict = judge_hack(tmp_path, "examples/relu", source, static_policy=False, **TIMED)
    if verdict.verdict == "pass":
        assert verdict.timings_ms.solution > 15, verdict.env["timing"]["solution"]
    else:
        assert verdict.reward == -1, verdict.message


@pytest.mark.parametrize(
    "install",
    [
        "import sys\nsys.setprofile(lambda *a: None)",
        "import gc\ngc.callbacks.append(lambda *a: None)",
        "lib = torch.library.Library('aten', 'IMPL')\nlib.impl('relu', lambda t: t, 'CPU')\nself.lib = lib",
        "lib = torch.library.Library('aten', 'IMPL')\nlib.impl('normal_', lambda t, *a, **k: t.fill_(0.5), 'CPU')\n"
        "self.lib = lib",
    ],
    ids=["profile_hook", "gc_callback", "kernel_for_the_references_op", "kernel_for_the_input_draw"],
)
@pytest.mark.slow
def test_runtime_hooks_and_kernels_registered_in_the_candidates_process_reach_no_judge_code(
    tmp_path: Path, install: str
) -> None:
    # Registered in the first timed call, after every trial passed, and wrong from then on: the reference's relu and
    # the input draw's normal_ run in the grader's process, and the last timed output is judged in full.
    wrong_from_then_on = f"if self.calls >= {INSTALL_AT}:\n    {WRONG}\n{RELU}"
    source = _installs_at(install, wrong_from_then_on)
    verdict = judge_hack(tmp_path, "examples/relu", source, static_policy=False, **TIMED)
    assert (verdict.verdict, verdict.reward) == ("incorrect", -1), verdict.message

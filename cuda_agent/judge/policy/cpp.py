"""Static rules for a candidate's C++/CUDA text (the half of the judge's policy stage that reads kernels).

`check_cpp` reads one translation unit (a kernel file of a workspace, or the sources a single-file
solution passes to `load_inline`) as text: comments are blanked first, and string literals too
for every rule except those that read inline PTX, so neither can trigger or hide a rule. Offsets
are kept, so each finding names its line. `check_build_flags` reads the compiler and linker flags.

What this does not protect against: C++ is matched as text, not compiled, so an author who
builds names with the preprocessor in ways not listed here, calls ATen through a pointer the
rules cannot see, or uses arithmetic operators on a tensor held in a container can get past it.
The candidate worker's runtime checks (an ATen dispatch tracer, output snapshots after a device
sync, integrity checks of the harness) are the defence for those; this stage only rejects the
common spellings early, with a message the author can act on.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from cuda_agent.types import Violation

Where = Callable[[int], str]
"""Maps an offset in the scanned text to a location such as 'kernels/relu.cu:12'."""

ADVICE = {
    "cpp_torch_compute": "C++ may only allocate (torch::empty, torch::empty_like, torch::empty_strided, "
    "torch::zeros, torch::zeros_like), "
    "check (TORCH_CHECK) and read tensor metadata and data pointers; write the computation as your own loop or kernel",
    "forbidden_library": "include only torch/extension.h-style headers, the CUDA runtime, cuBLAS (GEMM), cuDNN "
    "(convolution), OpenMP and the C/C++ standard headers; link only -lcublas, -lcublasLt, -lcudnn, -fopenmp/-lgomp",
    "cublas_misuse": "cuBLAS is allowed for GEMM calls (cublas*gemm*, cublasGemm*Ex, cublasLt*) and handle/stream "
    "setup; cuDNN for convolution calls and descriptor setup",
    "side_stream": "launch every kernel on the current stream (at::cuda::getCurrentCUDAStream()) without graphs",
    "background_thread": "finish all work before the bound function returns; OpenMP (#pragma omp) and "
    "at::parallel_for are allowed because they join before returning, thread pools are not",
    "l2_persistence": "use ordinary loads and stores; persisting-L2 windows and evict-last policies are not allowed",
    "file_or_network_access": "kernels compute from their tensor arguments only: no files, environment, network, "
    "sleeping or process control",
    "global_state_change": "leave process-wide settings (torch context, device flags, OpenMP thread count, "
    "operator registrations for aten) as they are",
    "precision_downcast": "compute a float32 task in float32: no fp16/bf16/tf32/fp8 types, conversions, "
    "tensor-core math modes or PTX",
    "dynamic_code": "spell every name out and stay in C++: no token pasting (##), macros that build member names, "
    "or calls back into Python (py::module_::import, .attr())",
}

_STANDARD_HEADERS = """
vector cmath math.h algorithm cstdint stdint.h cstddef stddef.h omp.h limits climits limits.h cfloat float.h
type_traits utility array cstdio stdio.h cassert assert.h cstring string.h string tuple initializer_list numeric
functional iostream sstream iomanip stdexcept optional cstdlib stdlib.h memory unordered_map map set unordered_set
mutex atomic new iterator complex bit immintrin.h x86intrin.h xmmintrin.h emmintrin.h pmmintrin.h smmintrin.h
arm_neon.h
""".split()

_ALLOWED_INCLUDE = re.compile(
    r"torch/(extension|types|library)\.h|torch/csrc/utils/pybind\.h|pybind11/\w+\.h"
    r"|ATen/(ATen|Dispatch|Parallel|OpMathType|AccumulateType|TensorAccessor)\.h|ATen/core/Tensor\.h"
    r"|ATen/cuda/(CUDAContext|Exceptions)\.h|c10/(cuda|util|core|macros)/\w+\.h"
    r"|cuda(_runtime|_runtime_api|_fp16|_bf16)?\.h|device_launch_parameters\.h|vector_(types|functions)\.h"
    r"|math_constants\.h|mma\.h|cuda_pipeline(_primitives)?\.h|cuda/(pipeline|barrier|std/\w+)"
    r"|cooperative_groups(\.h|/\w+\.h)?|cublas_v2\.h|cublasLt\.h|cudnn\.h"
)

# torch::/at::/c10:: names that allocate, check, describe or launch, and never compute.
_ALLOWED_TORCH_NAME = re.compile(
    r"(torch|at)::(Tensor|TensorBase|TensorOptions|ScalarType(::\w+)?|Scalar|Device|DeviceType|Layout"
    r"|MemoryFormat(::\w+)?|IntArrayRef|ArrayRef|OptionalIntArrayRef|DimVector|IntList|Half|BFloat16|Dtype|dtype"
    r"|device|k[A-Z]\w*|empty|empty_like|empty_strided|zeros|zeros_like|(Generic)?(Packed)?TensorAccessor(32|64)?"
    r"|RestrictPtrTraits|DefaultPtrTraits|opmath_type|acc_type|optional|nullopt|parallel_for|get_num_threads"
    r"|get_thread_num|in_parallel_region|irange|DeviceGuard|OptionalDeviceGuard|ceil_div)"
    r"|at::cuda::(getCurrentCUDAStream|getDefaultCUDAStream|getStreamFromPool|setCurrentCUDAStream|CUDAStream"
    r"|CUDAStreamGuard|CUDAGuard|OptionalCUDAGuard|getCurrentDeviceProperties|getDeviceProperties"
    r"|getCurrentCUDABlasHandle|getCurrentCUDABlasLtHandle|current_device|device_count)"
    r"|c10::(?!.*(Dispatcher|OperatorHandle|KernelFunction|CachingAllocator|impl\b)).*"
)
_TORCH_NAME = re.compile(r"(?<![\w:])(?:::\s*)?((?:torch|at|c10|caffe2|aten)(?:\s*::\s*~?\w+)+)")
_FORBIDDEN_NAMESPACE = re.compile(r"(?<![\w:])(cub|thrust|cutlass|cute|cudnn_frontend|Eigen|dnnl|mkldnn|oneapi)\s*::")
_PREBUILT_NAMESPACE = re.compile(r"(?<![\w:])(dnnl|mkldnn|oneapi)\s*::")
_FORBIDDEN_LIB_CALL = re.compile(
    r"\b(cusparse\w*|cufft\w*|curand\w*|cusolver\w*|nccl\w*|cblas_\w+|mkl_\w+|MKL_\w+|LAPACKE_\w+|npp\w+|[sdcz]gemm_)\s*\("
)

_TENSOR_METHODS = """
add add_ sub sub_ mul mul_ div div_ true_divide floor_divide fmod remainder matmul mm bmm addmm addmm_ baddbmm addbmm
addmv mv dot vdot outer ger einsum tensordot relu relu_ relu6 sigmoid sigmoid_ tanh tanh_ exp exp_ exp2 expm1 log
log_ log2 log10 log1p sum nansum mean max min amax amin aminmax argmax argmin softmax log_softmax conv1d conv2d
conv3d conv_transpose1d conv_transpose2d conv_transpose3d convolution linear clamp clamp_ clamp_min clamp_max clip
pow pow_ sqrt sqrt_ rsqrt abs abs_ neg neg_ reciprocal copy_ fill_ zero_ clone to type_as cpu cuda half bfloat16
index_select index_put index_put_ index_add index_copy gather scatter scatter_ scatter_add
scatter_reduce where masked_fill masked_fill_ masked_select masked_scatter cat stack norm layer_norm batch_norm
group_norm instance_norm gelu silu elu selu celu leaky_relu hardtanh softplus softsign mish hardswish hardsigmoid
logsumexp cumsum cumprod cummax cummin prod var std var_mean std_mean sort topk kthvalue median mode argsort unique
repeat repeat_interleave tile flip roll triu tril diag diagonal_scatter cross erf erfc erfinv sin cos tan asin acos
atan atan2 sinh cosh floor ceil round trunc frac sign maximum minimum fmax fmin lerp addcmul addcdiv dropout
max_pool1d max_pool2d max_pool3d avg_pool1d avg_pool2d avg_pool3d adaptive_avg_pool1d adaptive_avg_pool2d
adaptive_avg_pool3d adaptive_max_pool2d upsample_nearest2d upsample_bilinear2d interpolate pad constant_pad_nd
embedding cross_entropy nll_loss mse_loss l1_loss smooth_l1_loss kl_div binary_cross_entropy cosine_similarity
pairwise_distance cdist eq ne gt lt ge le logical_and logical_or logical_not logical_xor bitwise_and bitwise_or
bitwise_xor bitwise_not equal allclose isclose isnan isinf nonzero bincount histc normal_ uniform_ random_
bernoulli bernoulli_ multinomial fill_diagonal_ masked_fill scaled_dot_product_attention
""".split()
_TENSOR_METHOD_CALL = re.compile(
    r"(?:\.|->)\s*(" + "|".join(sorted(set(_TENSOR_METHODS), key=len, reverse=True)) + r")\s*(?:<[^<>;()]*>)?\s*\("
)

_ALLOWED_CUBLAS = re.compile(
    r"cublas([SDCZH]?gemm\w*|Gemm\w*|Lt\w*|(Create|Destroy|SetStream|GetStream|SetMathMode|GetMathMode|SetWorkspace"
    r"|SetPointerMode|GetPointerMode|GetStatusString|GetStatusName|GetVersion|GetProperty)(_v2)?|\w*_t)"
)
_ALLOWED_CUDNN = re.compile(
    r"cudnn((Create|Destroy)(\w*Descriptor)?|(Set|Get)\w*Descriptor\w*|\w*Convolution\w*|SetStream|GetStream"
    r"|GetErrorString|GetVersion|GetCudartVersion|\w*_t)"
)

# (rule, pattern); each pattern is searched in the code with comments and string literals blanked.
_TOKEN_RULES: list[tuple[str, str]] = [
    (
        "side_stream",
        r"\b(cudaStreamCreate\w*|cuStreamCreate\w*|cudaStreamNonBlocking|getStreamFromPool"
        r"|getStreamFromExternal|setCurrentCUDAStream|CUDAStreamGuard|cudaStreamBeginCapture\w*|cudaStreamPerThread"
        r"|cudaGraph\w*|cuGraph\w*)\b",
    ),
    (
        "background_thread",
        r"\bstd\s*::\s*(thread|jthread|async)\b|\bpthread_create\b|(\.|->)\s*detach\s*\("
        r"|(?<![\w:.])j?thread\s+\w+\s*[({]|\blaunch\s*::\s*async\b"
        r"|\bcudaLaunchHostFunc\b|\bcudaStreamAddCallback\b|\bat\s*::\s*launch\b"
        # torch's own pools: a c10::ThreadPool thread kept alive between calls precomputed the next call's result
        # from the block glibc would hand the judge's next input, during the cache flush.
        r"|\w*ThreadPool\w*|\bintraop_launch\w*|\blaunch_no_thread_state\b|\bget_thread_pool\b"
        r"|\bnew\s+j?thread\b|\bpthread_setname\w*"
        # glibc starts a thread of its own for a timer that notifies by SIGEV_THREAD, and for C11's threads
        r"|\btimer_create\b|\bthrd_create\b",
    ),
    (
        # Process-wide hooks that run the candidate's code inside the judge's own work: a wrapped CPU allocator
        # (c10::SetCPUAllocator) ran the whole computation on the judge's first allocation after the clock stopped,
        # or precomputed the next call's result while the judge flushed the cache; a storage
        # deleter ran it when the judge let the previous output go; operator callbacks run on every torch call.
        "global_state_change",
        r"\b[Ss]et\w*Allocator\w*\b|\bREGISTER_\w*ALLOCATOR\w*\b|\bCUDACachingAllocator\s*::\s*allocator\b"
        r"|\b(?:class|struct)\s+\w+\s*(?:final\s*)?:\s*(?:(?:public|protected|private|virtual)\s+)*(?:::\s*)?"
        r"(?:(?:c10|at|torch)\s*::\s*)?\w*Allocator\b"
        r"|\b\w*DataPtr\b|\bset_data_ptr\w*\b|\bInefficientStdFunctionContext\b"
        r"|\badd\w*Callback\b|\bRecordFunction\w*\b|\bset_warning_handler\b"
        # glibc's allocator settings: keeping freed blocks on the heap (mallopt) predicts where the
        # judge's next input would land.
        r"|\b(?:mallopt|malloc_trim|mallinfo2?|sbrk|brk|__malloc_\w+)\b",
    ),
    (
        "l2_persistence",
        r"\b(cudaLimitPersistingL2CacheSize|accessPolicyWindow|cudaAccessPropertyPersisting"
        r"|cudaStreamSetAttribute|cudaCtxResetPersistingL2Cache|cudaDeviceSetLimit|cuCtxSetLimit|cudaStreamAttrValue"
        r"|CU_LIMIT_PERSISTING_L2_CACHE_SIZE|\w*AccessPolicyWindow|annotated_ptr|access_property)\b",
    ),
    (
        "file_or_network_access",
        r"(?<![\w.>])(fopen|freopen|fdopen|popen|system|socket|connect|dlopen|dlsym|getenv"
        r"|setenv|putenv|fork|vfork|kill|raise|exit|_exit|_Exit|quick_exit|abort|terminate|execl|execlp|execle|execv"
        r"|execvp|execve|unlink|mmap|syscall|ptrace|open|creat|sleep|usleep|mprotect|pkey_mprotect|mremap|madvise"
        r"|process_vm_writev|process_vm_readv|prctl|dl_iterate_phdr|dladdr"
        # libc's names of each family (open64, openat2, preadv2, lseek64...), not every name that starts so: a
        # helper of the candidate's own (`open_interval_clamp`, `read_row`) is no file access.
        r"|open(?:at)?(?:64|2)?|opendir|open_w?memstream|open_by_handle_at|p(?:read|write)v?(?:64)?(?:v2)?"
        r"|l?lseek(?:64)?|write|read|fwrite|fread|ioctl|signal|sigaction)\s*\("
        # Code that runs when the library loads, before any check: such code can patch libc's
        # clock_gettime from a constructor.
        r"|\b(constructor|destructor)\s*(\(\s*\d*\s*\))?\s*\)\s*\)|\bgnu\s*::\s*(constructor|destructor)\b"
        r"|\bsection\s*\(\s*\"?\s*\.(init|fini|preinit)"
        r"|\bstd\s*::\s*(ifstream|ofstream|fstream|filebuf|filesystem)\b|\bFILE\s*\*",
    ),
    (
        "global_state_change",
        r"\b(globalContext|cudaDeviceReset|cudaSetDevice|cudaSetDeviceFlags|cudaDeviceSetCacheConfig"
        r"|cudaDeviceSetSharedMemConfig|cudaDeviceSetMemPool|cudaProfilerStart|cudaProfilerStop|omp_set_num_threads"
        r"|num_threads(?=\s*\()"  # an OpenMP clause that takes more threads than the timing gives
        r"|omp_set_dynamic|omp_set_max_active_levels|set_num_threads|set_num_interop_threads|TORCH_LIBRARY_IMPL"
        r"|TORCH_LIBRARY_FRAGMENT)\b",
    ),
    (
        "dynamic_code",
        r"##|\bnamespace\s+\w+\s*=\s*(::\s*)?std\s*;|\b(py|pybind11)\s*::\s*(module_?\s*::\s*import|eval\w*|exec|globals|import)\b"
        # Any CPython C API call (PySys_GetObject, PyDict_GetItemString, PyObject_SetAttrString...): from C++
        # they reach torch's Python module and can replace the op the reference calls.
        # Named anywhere, not only where called: macros can rename them.
        r"|\b_?Py[A-Z][A-Za-z]*_\w+|\b_?Py[A-Z][A-Za-z]+\s*\(|(\.|->)\s*(attr|import|add_object|reload)\s*\("
        # pybind11 beyond binding functions: `py::getattr(torch, ...)`, `py::object` parameters that receive a
        # module (a timer can be rewritten this way).
        r"|\b(py|pybind11)\s*::\s*(?!(arg|arg_v|return_value_policy|call_guard|gil_scoped_release|gil_scoped_acquire"
        r"|overload_cast|init|kw_only|pos_only|module_local|module_|module)\b)[A-Za-z_]\w*",
    ),
]
_PRECISION_TOKENS = re.compile(
    r"\b(__half2?|half2|__nv_bfloat162?|nv_bfloat162?|__float2half\w*|__floats2half2\w*|__float22half2\w*"
    r"|__half2float|__float2bfloat16\w*|__nv_fp8\w*|__float_to_tf32|CUBLAS_COMPUTE_32F_FAST_\w+"
    r"|CUBLAS_TF32_TENSOR_OP_MATH|CUBLAS_TENSOR_OP_MATH|CUBLAS_COMPUTE_16F\w*|CUDA_R_16F|CUDA_R_16BF|CUDA_R_8F\w*"
    r"|CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION|CUDNN_DATA_HALF|CUDNN_DATA_BFLOAT16|CUDNN_DATA_FP8\w*|cublasHgemm\w*"
    r"|kHalf|kBFloat16|kFloat16|Float8\w*)\b"
    r"|\b(at|c10|torch)\s*::\s*(Half|BFloat16)\b|\bScalarType\s*::\s*(Half|BFloat16)\b|\bprecision\s*::\s*tf32\b"
    r"|[<,]\s*half\s*[,>]|\bhalf\s*[*&]|\(\s*half\s*\)|\bhalf\s+[A-Za-z_]\w*\s*[=;,)\[]"
    r"|\b(using\s+\w+\s*=|typedef)\s*(::\s*)?half\b"
)
# A variable named `half` (`int half = blockDim.x / 2;`, a parameter `int half`), not cuda_fp16.h's type: an
# identifier right before it that is a type, not a keyword that takes an expression.
_HALF_VARIABLE = re.compile(
    r"\b(?!(?:return|case|else|goto|throw|delete|new|sizeof|alignof|typedef|using|struct|class|union|enum|typename"
    r"|template|namespace|operator|co_return|co_yield|co_await|do|if|while|switch|for)\b)[A-Za-z_]\w*"
    r"(?:[\s*&]*\s|\s*[*&]+)(?<![:.])(?P<name>half)\s*(?=[=;,)\[{])"
)
_HALF_TOKEN = re.compile(r"(?<![\w:])half\b")
_MEMBER_HALF = re.compile(r"(?:\.|->)\s*half\b")
# Under kernelbench C++ may call torch, but not switch off the dispatcher's view of torch's work (a key guard
# would hide torch ops from the dataflow check that proves the candidate's kernels reach its outputs).
_KERNELBENCH_DISPATCH = re.compile(
    r"\b(\w*DispatchKey\w*|AutoDispatch\w*|Dispatcher|OperatorHandle|KernelFunction|PythonDispatcher\w*"
    r"|tls_\w+|CachingAllocator\w*)\b"
)
# Under kernelbench torch may compute in C++, but through the dispatcher, which the runtime checks watch: torch's
# per-backend kernels called directly (at::cpu::addmm_out, at::native::*) compute unseen, so the dataflow check
# would credit torch's work to the candidate (a solution of only at::cpu:: calls would pass as its own).
_DISPATCHER_FREE = re.compile(
    r"(?<![\w:])(?:::\s*)?at\s*::\s*(?:cpu|native|meta|composite\w*)\s*::\s*\w+"
    # at::cuda's op functions (snake_case, as at::cuda::addmm_out); not its types and getters (CUDAGuard,
    # getCurrentCUDAStream, warp_size) nor at::cuda::blas:: (cuBLAS)
    r"|(?<![\w:])(?:::\s*)?at\s*::\s*cuda\s*::\s*(?![A-Z]|get[A-Z]|warp_size\b)\w+\b(?!\s*::)"
)
# Names no rule can read because they are not spelled in the code: an asm label or alias attribute binds a declared
# name to another symbol (`void f() __asm__("sgemm_")`, a mangled torch internal), and a reopened torch namespace
# declares torch's functions under unqualified names (both would pass as the candidate's own code).
# The label is a string literal, so this reads the text with only comments removed; inline PTX has spaces or `;`.
_SYMBOL_ALIAS = re.compile(
    r"\b(?:__asm__|__asm|asm)\s*(?:(?:volatile|__volatile__)\s*)?\(\s*\"[A-Za-z_$.][\w$.@]*\"\s*\)"
    r"|\b(?:alias|weakref|ifunc)\s*\(\s*\""
)
_REOPENED_TORCH_NAMESPACE = re.compile(r"\bnamespace\s+(?:::\s*)?(?:torch|at|c10|caffe2|aten)\b\s*(?:::\s*\w+\s*)*\{")
# Inline PTX lives in string literals, so these two read the text with only comments removed.
_PTX_PRECISION = re.compile(r"\b(?:w?gmma|mma|cvt)(?:\.[\w:]+)*?\.(f16|bf16|tf32|e4m3|e5m2)\b")
_PTX_L2 = re.compile(r"\b(evict_last|createpolicy|applypriority)\b")

_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*([<\"])([^>\"\n]*)[>\"]", re.M)
_ODD_INCLUDE = re.compile(r"^[ \t]*#[ \t]*(include_next|import)\b|^[ \t]*#[ \t]*include[ \t]*(?![ \t<\"])", re.M)
_SYSTEM_PATH = re.compile(r"\"[^\"\n]*/(proc|dev|sys)/[^\"\n]*\"")
"""A literal path into the kernel's files: /proc/self/mem rewrites libc in place."""
_DIGRAPHS = (("%:%:", "##"), ("%:", "#"))
"""The preprocessor's digraphs (the bracket ones would need C++'s `<::` exception and hide nothing the rules need)."""


def _translation_phases(text: str) -> str:
    """The text as the compiler's early phases leave it: lines joined at backslash-newline, digraphs spelled out.
    A solution can split `mprotect` across a line splice or write `%:define` so that no rule
    saw the name. (Offsets shift by the joined newlines: a message's line may be off by as many.)"""
    text = re.sub(r"\\\r?\n", "", text)
    for digraph, spelled in _DIGRAPHS:
        text = text.replace(digraph, spelled)
    return text


# Under `using namespace std` a thread needs no `std::` (`new thread(job)`, never joined).
_USING_STD = re.compile(r"\busing\s+namespace\s+(?:::\s*)?std\b")
_BARE_THREAD = re.compile(r"(?<![\w.>:])(?:j?thread|async|packaged_task)\s*[<({]")
_ASM_SYSCALL = re.compile(r"\b(asm|__asm__|__asm)\b[^;]*?\"[^\"]*\b(syscall|sysenter|int\s*\$?0x80|svc)\b")
"""A system call in inline assembly, which no name rule sees: it can read the real time
this way after patching libc's clock."""
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)(\(([^)]*)\))?(.*(?:\\\n.*)*)", re.M)
_NAMESPACE_ALIAS = re.compile(
    r"\bnamespace\s+\w+\s*=\s*(::\s*)?(torch|at|c10)\s*;|\busing\s+namespace\s+(::\s*)?"
    r"(torch|at|c10)\b"
)
_LITERAL_OR_COMMENT = re.compile(
    r"(?P<comment>//[^\n]*|/\*.*?\*/)"
    r"|(?P<literal>R\"(?P<delim>[^()\\\s]{0,16})\(.*?\)(?P=delim)\"|\"(?:\\.|[^\"\\\n])*\"|(?<!\w)'(?:\\.|[^'\\\n]){1,8}')",
    re.S,
)


def blank_comments_and_literals(text: str) -> tuple[str, str]:
    """Return (text with comments blanked, text with comments and literals blanked); offsets are kept."""
    keep_literals, code = [], []
    last = 0
    for match in _LITERAL_OR_COMMENT.finditer(text):
        before = text[last : match.start()]
        blank = re.sub(r"[^\n]", " ", match.group(0))
        keep_literals += [before, blank if match.group("comment") else match.group(0)]
        code += [before, blank]
        last = match.end()
    keep_literals.append(text[last:])
    code.append(text[last:])
    return "".join(keep_literals), "".join(code)


def check_cpp(
    text: str, where: Where, *, strict_precision: bool, local_headers: set[str], kernelbench: bool = False
) -> list[Violation]:
    """Apply every C++/CUDA rule to one source text.

    Args:
        text: the C++ or CUDA source, as the compiler would read it.
        where: maps an offset in `text` to a location for messages.
        strict_precision: the task is float32, so fp16/bf16/tf32/fp8 use is a violation.
        local_headers: file names the solution itself provides, which quoted includes may name.
        kernelbench: the kernelbench policy: torch calls, CUDA libraries and any <system> header are allowed,
            dispatcher guards are not.

    Returns:
        One Violation per finding, in rule order.
    """
    text = _translation_phases(text)
    with_literals, code = blank_comments_and_literals(text)
    found = _check_includes(with_literals, where, local_headers, any_system_header=kernelbench)
    found += [
        _found("file_or_network_access", where(m.start()), f"names the system path `{m.group(0)}`")
        for m in _SYSTEM_PATH.finditer(with_literals)
    ]
    code = _INCLUDE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), code)  # header names are not calls
    found += [
        _found("dynamic_code", where(m.start()), f"binds a name to another symbol with `{m.group(0)}`")
        for m in _SYMBOL_ALIAS.finditer(with_literals)
    ]
    found += [
        _found("dynamic_code", where(m.start()), f"declares names inside torch's own namespace (`{m.group(0)}`)")
        for m in _REOPENED_TORCH_NAMESPACE.finditer(code)
    ]
    if kernelbench:
        found += [
            _found("global_state_change", where(m.start()), f"uses `{m.group(0)}`")
            for m in _KERNELBENCH_DISPATCH.finditer(code)
        ]
        found += [
            _found("global_state_change", where(m.start()), f"calls torch's kernel `{name}` around the dispatcher")
            for m in _DISPATCHER_FREE.finditer(code)
            if not _ALLOWED_TORCH_NAME.fullmatch(name := re.sub(r"\s+|^::", "", m.group(0)))
        ]
        found += _check_prebuilt_libraries(code, where)
    else:
        found += _check_torch_names(code, where)
        found += _check_tensor_methods(code, where)
        found += _check_tensor_operators(code, where)
        found += _check_libraries(code, where)
    found += _check_macros(code, where)
    for rule, pattern in _TOKEN_RULES:
        for m in re.finditer(pattern, code):
            found.append(_found(rule, where(m.start()), f"uses `{m.group(0).rstrip('({ ').strip()}`"))
    if _USING_STD.search(code):  # std's thread names without `std::` in front
        for m in _BARE_THREAD.finditer(code):
            found.append(_found("background_thread", where(m.start()), f"uses `{m.group(0).rstrip('<({ ')}`"))
    for m in _PTX_L2.finditer(with_literals):
        found.append(_found("l2_persistence", where(m.start()), f"uses the PTX cache policy `{m.group(0)}`"))
    for m in _ASM_SYSCALL.finditer(with_literals):
        found.append(_found("file_or_network_access", where(m.start()), "makes a system call from inline assembly"))
    if strict_precision:
        found += [
            _found("precision_downcast", where(m.start()), f"uses `{m.group(0).strip()}`")
            for m in _PRECISION_TOKENS.finditer(mask_half_variables(code))
        ]
        found += [
            _found("precision_downcast", where(m.start()), f"uses the PTX instruction `{m.group(0)}`")
            for m in _PTX_PRECISION.finditer(with_literals)
        ]
    return found


def check_build_flags(flags: list[tuple[str, str, str]]) -> list[Violation]:
    """Check compiler and linker flags given as (flag, argument name, location) triples.

    A flag can define macros or pull in libraries and headers, so only a known-harmless set is
    allowed; a `-DNAME=VALUE` macro is read by the C++ macro rules as well.
    """
    found = []
    for flag, argument, where in flags:
        pattern = _LDFLAG if argument == "extra_ldflags" else _CFLAG
        if flag.strip() and not pattern.fullmatch(flag.strip()):
            found.append(_found("forbidden_library", where, f"passes the flag {flag!r} in {argument}"))
        elif flag.startswith("-D"):
            name, _, value = flag[2:].partition("=")
            found += _check_macros(f"#define {name} {value}\n", lambda _offset, w=where: w)
            for rule, token in _TOKEN_RULES:  # the value as if it were called where the macro is used
                if value and re.search(token, f"{value}(x)"):
                    found.append(_found(rule, where, f"defines {name} as `{value}` in {argument}"))
    return found


_CFLAG = re.compile(
    r"-O[0-3s]?|--?use_fast_math|-ffast-math|--?std=(c|gnu)\+\+\d\d|-fopenmp|-march=native|-mtune=native"
    r"|-m(avx\w*|fma|sse\w*|f16c)|-funroll-loops|-fPIC|-g|-w|-v|-Wno-[\w-]+|-W(all|extra)|-lineinfo|--generate-line-info"
    r"|--expt-relaxed-constexpr|--expt-extended-lambda|-arch=sm_\d+a?|-gencode|(-gencode=)?arch=compute_\d+a?,code="
    r"\[?(s[mp]|compute)_\d+a?(,(s[mp]|compute)_\d+a?)*\]?|-rdc=(true|false)|--resource-usage|--ptxas-options=-v"
    r"|-Xptxas(=-v|=-O[0-3]|=--warn-spills)?|-Xcompiler([= ](-fopenmp|-O[0-3]|-march=native|-ffast-math|-fPIC))?"
    r"|--?maxrregcount=\d+|-D\w+(=[\w.]+)?|-U\w+"
)
_LDFLAG = re.compile(
    r"-l(cublas|cublasLt|cudnn|gomp|cuda|cudart|m)|-fopenmp|-L\S*(cuda|CUDA)\S*"
    r"|-Wl,-rpath,\S*(cuda|CUDA)\S*"
)


def _found(rule: str, where: str, what: str) -> Violation:
    return Violation(check=rule, message=f"{where}: {what}; {ADVICE[rule]}.")


# Headers whose only use in a kernel file is a background thread, a file, a socket or process control.
_KERNELBENCH_DENIED_HEADER = re.compile(
    r"thread|future|condition_variable|stop_token|pthread\.h|fstream|filesystem|unistd\.h|dlfcn\.h|fcntl\.h"
    r"|spawn\.h|netdb\.h|(sys|netinet|arpa)/[\w/]+\.h"
    # torch's per-backend kernels, called around the dispatcher (_DISPATCHER_FREE)
    r"|ATen/(CPU|CUDA|Meta|Native|Composite\w*)Functions(_inl)?\.h|ATen/ops/\w+_(cpu|cuda|meta|native|composite\w*)"
    r"(_dispatch)?\.h"
)


def mask_half_variables(code: str) -> str:
    """`code` with every `half` that names a variable or member blanked, so the precision rule reads the type only.

    A declared variable hides the type for the rest of its block (a parameter's or a for-header's: the body that
    follows), where `half` can only be the variable; `::half` still names the type there and stays. A member
    (`s.half`, `p->half`) is never the type. Offsets are kept.
    """
    unsure = _conditional_regions(code)
    spans = [
        (m.start("name"), _scope_end(code, m.start("name")))
        for m in _HALF_VARIABLE.finditer(code)
        if not any(start <= m.start() < end for start, end in unsure)
    ]
    blank = "_" * len("half")

    def mask(match: re.Match[str]) -> str:
        inside = any(start <= match.start() < end for start, end in spans)
        return blank if inside else match.group(0)

    code = _MEMBER_HALF.sub(lambda m: m.group(0)[: -len("half")] + blank, code)
    return _HALF_TOKEN.sub(mask, code) if spans else code


def _conditional_regions(code: str) -> list[tuple[int, int]]:
    """Spans of text the compiler may never see, so a declaration there hides nothing: directive lines (a macro's
    body) and what `#if`/`#ifdef`/`#ifndef` ... `#endif` enclose, bar an include guard (`#ifndef X` + `#define X`)."""
    regions, opened = [], []
    for m in re.finditer(r"^[ \t]*#[ \t]*(\w+)[^\n]*", code, re.M):
        regions.append((m.start(), m.end()))
        directive = m.group(1)
        guard = re.match(r"[ \t]*#[ \t]*ifndef[ \t]+(\w+)\s*#[ \t]*define[ \t]+(\w+)", code[m.start() :])
        if directive.startswith("if"):
            opened.append(None if guard and guard.group(1) == guard.group(2) else m.start())
        elif directive == "endif" and opened:
            start = opened.pop()
            regions += [] if start is None else [(start, m.end())]
    return regions + [(start, len(code)) for start in opened if start is not None]


def _scope_end(code: str, offset: int) -> int:
    """Where the scope of a name declared at `offset` ends: its block's `}`; for a name declared inside `(...)`
    (a parameter, a for-header), the end of the statement or block that follows the `)`."""
    depth, i = 0, offset
    while i < len(code):
        char = code[i]
        if char in "({[":
            depth += 1
        elif char in ")}]":
            if depth == 0 and char == "}":
                return i
            if depth == 0 and char == ")":
                return _statement_end(code, i + 1)
            if depth == 0:  # a `]`: not a declaration this can place
                return offset
            depth -= 1
        i += 1
    return len(code)


def _statement_end(code: str, offset: int) -> int:
    """The end of the block or statement that starts at `offset` (`{...}` with nesting, else up to the `;`)."""
    i = offset
    while i < len(code) and code[i].isspace():
        i += 1
    if i < len(code) and code[i] == "{":
        depth = 0
        for j in range(i, len(code)):
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            if depth == 0:
                return j
        return len(code)
    end = code.find(";", i)
    return len(code) if end < 0 else end


def _check_includes(
    text: str, where: Where, local_headers: set[str], any_system_header: bool = False
) -> list[Violation]:
    found = []
    for m in _INCLUDE.finditer(text):
        header = m.group(2).strip()
        local = m.group(1) == '"' and header.rsplit("/", 1)[-1] in local_headers
        system = (
            any_system_header
            and m.group(1) == "<"
            and ".." not in header
            and not header.startswith("/")
            and not _KERNELBENCH_DENIED_HEADER.fullmatch(header)
        )
        if not (local or system or header in _STANDARD_HEADERS or _ALLOWED_INCLUDE.fullmatch(header)):
            found.append(_found("forbidden_library", where(m.start()), f"includes <{header}>"))
    for m in _ODD_INCLUDE.finditer(text):
        found.append(_found("forbidden_library", where(m.start()), "includes a file through a macro or #import"))
    return found


def _check_torch_names(code: str, where: Where) -> list[Violation]:
    found = []
    for m in _TORCH_NAME.finditer(code):
        name = re.sub(r"\s+", "", m.group(1))
        if not _ALLOWED_TORCH_NAME.fullmatch(name):
            found.append(_found("cpp_torch_compute", where(m.start()), f"uses `{name}`"))
    for m in _NAMESPACE_ALIAS.finditer(code):
        found.append(
            _found(
                "cpp_torch_compute",
                where(m.start()),
                "aliases a torch namespace (`using namespace`, `namespace X = at`), which hides torch calls",
            )
        )
    return found


def _check_tensor_methods(code: str, where: Where) -> list[Violation]:
    return [
        _found("cpp_torch_compute", where(m.start()), f"calls the tensor method `.{m.group(1)}()`")
        for m in _TENSOR_METHOD_CALL.finditer(code)
    ]


def _check_prebuilt_libraries(code: str, where: Where) -> list[Violation]:
    """Calls into prebuilt libraries other than cuBLAS/cuDNN: their work would count as the candidate's own.

    Header-only ones (CUB, Thrust, CUTLASS, Eigen) compile into the candidate's kernels and are not listed.
    """
    found = []
    for m in _PREBUILT_NAMESPACE.finditer(code):
        found.append(_found("forbidden_library", where(m.start()), f"uses the library namespace `{m.group(1)}::`"))
    for m in _FORBIDDEN_LIB_CALL.finditer(code):
        found.append(_found("forbidden_library", where(m.start()), f"calls the library function `{m.group(1)}`"))
    return found


def _check_libraries(code: str, where: Where) -> list[Violation]:
    found = [
        _found("forbidden_library", where(m.start()), f"uses the library namespace `{m.group(1)}::`")
        for m in _FORBIDDEN_NAMESPACE.finditer(code)
        if not _PREBUILT_NAMESPACE.match(code, m.start())
    ]
    found += _check_prebuilt_libraries(code, where)
    for m in re.finditer(r"\bcublas\w+", code):
        if not _ALLOWED_CUBLAS.fullmatch(m.group(0)):
            found.append(_found("cublas_misuse", where(m.start()), f"calls `{m.group(0)}`, which is not a GEMM"))
    for m in re.finditer(r"\bcudnn\w+", code):
        if not _ALLOWED_CUDNN.fullmatch(m.group(0)):
            found.append(_found("cublas_misuse", where(m.start()), f"calls `{m.group(0)}`, which is not a convolution"))
    return found


def _check_macros(code: str, where: Where) -> list[Violation]:
    """Macros that assemble a forbidden method call the other rules would not see spelled out."""
    found = []
    methods = set(_TENSOR_METHODS)
    for m in _DEFINE.finditer(code):
        params = [p.strip() for p in (m.group(3) or "").split(",") if p.strip()]
        body = m.group(4).strip()
        if m.group(2) is None and re.fullmatch(r"\w+", body):  # NAME for a forbidden function, used as NAME(...)
            found += [
                _found(rule, where(m.start()), f"defines the macro {m.group(1)} as `{body}`")
                for rule, token in _TOKEN_RULES
                if re.search(token, f"{body}(x)")
            ]
        if any(re.search(r"(?<![\w.>])" + re.escape(p) + r"\s*\(", body) for p in params):
            found.append(_found("dynamic_code", where(m.start()), f"macro {m.group(1)} calls a function it is given"))
        if m.group(2) is None and body in methods:
            found.append(
                _found("cpp_torch_compute", where(m.start()), f"defines a macro for the tensor method `{body}`")
            )
        for param in params:
            if re.search(r"(\.|->|::)\s*" + re.escape(param) + r"\b", body):
                found.append(
                    _found(
                        "dynamic_code",
                        where(m.start()),
                        f"macro {m.group(1)} builds a member name from its argument {param}",
                    )
                )
    return found


_TENSOR_DECL = re.compile(r"(?<![\w:])(?:(?:torch|at)\s*::\s*)?Tensor\b\s*(?:&&?|\*)?\s*(\w+)\s*(?=[,)=;\[])")
_AUTO_DECL = re.compile(r"\bauto\s*&?\s*(\w+)\s*=\s*([^;]*);")
_TENSOR_RESULT = re.compile(
    r"\s*(?:(?:torch|at)\s*::\s*(?!cuda\b)\w+\s*\(|(\w+)\s*(?:;|$|\.\s*(?:contiguous|view|reshape"
    r"|permute|transpose|unsqueeze|squeeze|flatten|expand|narrow|select|slice|t|clone|to|detach"
    r"|as_strided)\s*\())"
)


def _check_tensor_operators(code: str, where: Where) -> list[Violation]:
    """Arithmetic operators applied to a variable declared as a tensor run ATen kernels (`a + b`)."""
    decls = [(m.group(1), m.end(1)) for m in _TENSOR_DECL.finditer(code)]
    names = {name for name, _ in decls}
    for m in _AUTO_DECL.finditer(code):
        result = _TENSOR_RESULT.match(m.group(2))
        if result and (result.group(1) is None or result.group(1) in names):
            decls.append((m.group(1), m.end(1)))
            names.add(m.group(1))
    found, seen = [], set()
    for name, start in decls:
        operand = rf"(?<![\w.>:]){re.escape(name)}(?!\w)"
        pattern = re.compile(
            rf"{operand}\s*(?:[-+*/%^|](?![->+=|])|[-+*/%^|]=)|(?<![-+])[-+*/%~]\s*{operand}"
            rf"(?!\s*(?:\.|->|\[|\())"
        )
        for m in pattern.finditer(code, start, _scope_end(code, start)):
            if m.start() not in seen:
                seen.add(m.start())
                found.append(
                    _found(
                        "cpp_torch_compute",
                        where(m.start()),
                        f"applies an arithmetic operator to the tensor `{name}` (ATen does the work)",
                    )
                )
    return found


def _scope_end(code: str, pos: int) -> int:
    """Offset where a declaration at `pos` goes out of scope: its block's end, or its function's."""
    is_parameter = _inside_parentheses(code, pos)
    depth = 0
    for i in range(pos, len(code)):
        char = code[i]
        if char == "{":
            depth += 1
        elif char == "}":
            if depth == 0:
                return i
            depth -= 1
            if is_parameter and depth == 0:
                return i
        elif char == ";" and is_parameter and depth == 0:
            return i
    return len(code)


def _inside_parentheses(code: str, pos: int) -> bool:
    depth = 0
    for i in range(pos - 1, -1, -1):
        char = code[i]
        if char in ";{}":
            return False
        if char == ")":
            depth += 1
        elif char == "(":
            if depth == 0:
                return True
            depth -= 1
    return False

/* tc_graph's onnxruntime custom-op library: the TcKernel op of domain ai.tc_graph.
 *
 * Each TcKernel node names a compiled kernel (<cache>/<kernel_key>/kernel.so, or
 * <dir>/<kernel_key>/kernel.so where the session config entry tc_graph.kernel_dir or else
 * $TC_GRAPH_KERNEL_DIR names the kernel directory of a packaged model) that follows the
 * library <-> kernel contract of docs/onnx.md (ABI version 1). Creating the kernel
 * recomputes the node's kernel_key from its attributes (a key names its content, so a model
 * cannot borrow another model's kernel), checks <key>/meta.json names that key and the
 * sha256 of the kernel.so bytes it reads and that this CPU has the features it lists,
 * dlopens exactly those bytes (from a memfd, so the file cannot change between the check
 * and the load) and checks the kernel's metadata against the node. Computing checks the inputs and the outputs onnxruntime allocated
 * against the metadata, allocates the temporaries and runs the kernel's phases in order,
 * handing every phase of more than one iteration to onnxruntime's thread pool.
 *
 * onnxruntime's wheel ships no C header, so the few ABI pieces used here are declared below
 * from the facts in ORT_ABI.md (slot numbers, enum values, struct layout). Nothing is linked
 * against libonnxruntime: every call goes through the OrtApi table handed to
 * RegisterCustomOps / CreateKernelV2. Build: -O2 -fPIC -shared -fvisibility=hidden, -ldl.
 *
 * No global mutable state: the op description is a constant, and everything a run needs
 * (argument arrays, temporaries, the first failed check) lives in that run's own memory, so
 * concurrent Run calls on one session are safe.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define TC_VISIBLE __attribute__((visibility("default")))

/* ------------------------------------------------------------------ onnxruntime ABI pieces */

/* Opaque handles: only ever passed back to onnxruntime. */
typedef struct ort_status ort_status;
typedef struct ort_session_options ort_session_options;
typedef struct ort_domain ort_domain;
typedef struct ort_kernel_info ort_kernel_info;
typedef struct ort_kernel_context ort_kernel_context;
typedef struct ort_value ort_value;
typedef struct ort_type_shape ort_type_shape;
typedef struct ort_key_values ort_key_values;
typedef struct ort_memory_info ort_memory_info;
typedef struct ort_allocator ort_allocator;

/* The OrtApi table is an append-only array of function pointers; calls cast a slot. */
typedef struct ort_api ort_api;
typedef void (*ort_slot)(void);

typedef struct {
    const ort_api *(*get_api)(uint32_t version);
    const char *(*get_version_string)(void);
} ort_api_base;

/* API version requested: 24 is the first with KernelInfo_GetConfigEntries (slot 391), which
 * reads the session config entry naming a kernel directory. An older runtime gets API 17,
 * the first with KernelContext_ParallelFor (slot 274), and only the environment variable. */
#define TC_ORT_API_VERSION 24u
#define TC_ORT_API_MIN 17u
/* Where a deployed model's kernels are (docs/onnx.md "Deploying"), else the user's cache. */
#define TC_KERNEL_DIR_CONFIG "tc_graph.kernel_dir"
#define TC_KERNEL_DIR_ENV "TC_GRAPH_KERNEL_DIR"

enum {
    SLOT_CREATE_STATUS = 0,
    SLOT_CREATE_CUSTOM_OP_DOMAIN = 26,
    SLOT_CUSTOM_OP_DOMAIN_ADD = 27,
    SLOT_ADD_CUSTOM_OP_DOMAIN = 28,
    SLOT_GET_TENSOR_MUTABLE_DATA = 51,
    SLOT_GET_TENSOR_ELEMENT_TYPE = 60,
    SLOT_GET_DIMENSIONS_COUNT = 61,
    SLOT_GET_DIMENSIONS = 62,
    SLOT_GET_TENSOR_TYPE_AND_SHAPE = 65,
    SLOT_CREATE_CPU_MEMORY_INFO = 69,
    SLOT_ALLOCATOR_ALLOC = 75,
    SLOT_ALLOCATOR_FREE = 76,
    SLOT_KERNEL_INFO_GET_ATTRIBUTE_STRING = 87,
    SLOT_KERNEL_CONTEXT_GET_INPUT_COUNT = 88,
    SLOT_KERNEL_CONTEXT_GET_OUTPUT_COUNT = 89,
    SLOT_KERNEL_CONTEXT_GET_INPUT = 90,
    SLOT_KERNEL_CONTEXT_GET_OUTPUT = 91,
    SLOT_RELEASE_STATUS = 93,
    SLOT_RELEASE_MEMORY_INFO = 94,
    SLOT_RELEASE_TENSOR_TYPE_AND_SHAPE = 99,
    SLOT_RELEASE_CUSTOM_OP_DOMAIN = 101,
    SLOT_RELEASE_ALLOCATOR = 132,
    SLOT_KERNEL_INFO_GET_ATTRIBUTE_ARRAY_INT64 = 163,
    SLOT_KERNEL_INFO_GET_INPUT_COUNT = 230,
    SLOT_KERNEL_INFO_GET_OUTPUT_COUNT = 231,
    SLOT_KERNEL_INFO_GET_CONSTANT_INPUT = 249, /* API 15 */
    SLOT_KERNEL_CONTEXT_GET_ALLOCATOR = 253, /* API 15 */
    SLOT_KERNEL_CONTEXT_PARALLEL_FOR = 274,
    SLOT_GET_KEY_VALUE = 297,             /* API 22 */
    SLOT_RELEASE_KEY_VALUE_PAIRS = 300,   /* API 22 */
    SLOT_KERNEL_INFO_GET_CONFIG_ENTRIES = 391, /* API 24 */
};

#define ORT_CALL(api, slot, type) ((type)(((const ort_slot *)(const void *)(api))[(slot)]))

enum { ORT_FAIL = 1, ORT_INVALID_ARGUMENT = 2, ORT_RUNTIME_EXCEPTION = 6 };
enum { ORT_TYPE_UNDEFINED = 0 };
enum { ORT_CHARACTERISTIC_VARIADIC = 2 };
enum { ORT_MEM_TYPE_DEFAULT = 0 };
enum { ORT_ARENA_ALLOCATOR = 1 };

typedef ort_status *(*create_status_fn)(int code, const char *msg);
typedef ort_status *(*create_domain_fn)(const char *domain, ort_domain **out);
typedef ort_status *(*domain_add_fn)(ort_domain *domain, const void *op);
typedef ort_status *(*add_domain_fn)(ort_session_options *options, ort_domain *domain);
typedef void (*release_domain_fn)(ort_domain *domain);
typedef ort_status *(*mutable_data_fn)(ort_value *value, void **out);
typedef ort_status *(*element_type_fn)(const ort_type_shape *info, int *out);
typedef ort_status *(*dims_count_fn)(const ort_type_shape *info, size_t *out);
typedef ort_status *(*dims_fn)(const ort_type_shape *info, int64_t *dims, size_t len);
typedef ort_status *(*type_and_shape_fn)(const ort_value *value, ort_type_shape **out);
typedef void (*release_type_shape_fn)(ort_type_shape *info);
typedef ort_status *(*attr_string_fn)(const ort_kernel_info *info, const char *name, char *out,
                                      size_t *size);
typedef ort_status *(*attr_ints_fn)(const ort_kernel_info *info, const char *name, int64_t *out,
                                    size_t *size);
typedef ort_status *(*info_count_fn)(const ort_kernel_info *info, size_t *out);
typedef ort_status *(*context_count_fn)(const ort_kernel_context *ctx, size_t *out);
typedef ort_status *(*constant_input_fn)(const ort_kernel_info *info, size_t index,
                                         int *is_constant, const ort_value **out);
typedef ort_status *(*context_input_fn)(const ort_kernel_context *ctx, size_t index,
                                        const ort_value **out);
typedef ort_status *(*context_output_fn)(ort_kernel_context *ctx, size_t index,
                                         const int64_t *dims, size_t ndims, ort_value **out);
typedef void (*release_status_fn)(ort_status *status);
typedef ort_status *(*config_entries_fn)(const ort_kernel_info *info, ort_key_values **out);
typedef const char *(*get_key_value_fn)(const ort_key_values *kvs, const char *key);
typedef void (*release_key_values_fn)(ort_key_values *kvs);
typedef ort_status *(*parallel_for_fn)(const ort_kernel_context *ctx,
                                       void (*fn)(void *usr, size_t i), size_t total,
                                       size_t num_batch, void *usr);
typedef ort_status *(*cpu_memory_info_fn)(int type, int mem_type, ort_memory_info **out);
typedef void (*release_memory_info_fn)(ort_memory_info *info);
typedef ort_status *(*context_allocator_fn)(const ort_kernel_context *ctx,
                                            const ort_memory_info *info, ort_allocator **out);
typedef ort_status *(*allocator_alloc_fn)(ort_allocator *alloc, size_t size, void **out);
typedef ort_status *(*allocator_free_fn)(ort_allocator *alloc, void *p);
typedef void (*release_allocator_fn)(ort_allocator *alloc);

/* The custom-op description: 26 pointer-sized members, member i at byte offset 8 * i. */
typedef struct tc_op tc_op;
struct tc_op {
    uint32_t version;
    void *(*create_kernel)(const tc_op *op, const ort_api *api, const ort_kernel_info *info);
    const char *(*get_name)(const tc_op *op);
    const char *(*get_execution_provider_type)(const tc_op *op);
    int (*get_input_type)(const tc_op *op, size_t index);
    size_t (*get_input_type_count)(const tc_op *op);
    int (*get_output_type)(const tc_op *op, size_t index);
    size_t (*get_output_type_count)(const tc_op *op);
    void (*kernel_compute)(void *kernel, ort_kernel_context *ctx);
    void (*kernel_destroy)(void *kernel);
    int (*get_input_characteristic)(const tc_op *op, size_t index);
    int (*get_output_characteristic)(const tc_op *op, size_t index);
    int (*get_input_memory_type)(const tc_op *op, size_t index);
    int (*get_variadic_input_min_arity)(const tc_op *op);
    int (*get_variadic_input_homogeneity)(const tc_op *op);
    int (*get_variadic_output_min_arity)(const tc_op *op);
    int (*get_variadic_output_homogeneity)(const tc_op *op);
    ort_status *(*create_kernel_v2)(const tc_op *op, const ort_api *api,
                                    const ort_kernel_info *info, void **kernel);
    ort_status *(*kernel_compute_v2)(void *kernel, ort_kernel_context *ctx);
    void *infer_output_shape;
    void *get_start_version;
    void *get_end_version;
    void *get_may_inplace;
    void *release_may_inplace;
    void *get_alias_map;
    void *release_alias_map;
};
_Static_assert(sizeof(tc_op) == 208, "OrtCustomOp has 26 pointer-sized members");
_Static_assert(offsetof(tc_op, create_kernel_v2) == 8 * 17, "CreateKernelV2 is member 17");
_Static_assert(offsetof(tc_op, release_alias_map) == 8 * 25, "ReleaseAliasMap is member 25");

/* ------------------------------------------------------------------------ kernel contract */

#define TC_ABI_VERSION 1
#define TC_SIZES_ABI_VERSION 2 /* a kernel for every size (docs/onnx.md) */
#define TC_MAX_RANK 64      /* per-run dimension buffers live on the stack */
#define TC_MAX_CHUNKS 256   /* parallel phases are split into at most this many ranges */
#define TC_MESSAGE_BYTES 1024
#define TC_MAX_LEAD 8       /* leading dimensions a rows node's rows may span */
#define TC_MAX_SPECIAL 64   /* specialised kernels of a node for every size */

typedef int (*tc_phase_fn)(int32_t phase, void *const *args, void *const *temps, int64_t lo,
                           int64_t hi, int64_t *err);
/* ABI 2: the phases take the sizes, which tc_shapes reads off the input dimensions (with
 * the outputs' dimensions, the temporaries' bytes and the phases' iterations), or refuses
 * with a message. */
typedef int (*tc_sized_phase_fn)(int32_t phase, void *const *args, void *const *temps,
                                 const int64_t *sizes, int64_t lo, int64_t hi, int64_t *err);
typedef int (*tc_shapes_fn)(const int64_t *in_dims, int64_t *sizes, int64_t *out_dims,
                            int64_t *temp_bytes, int64_t *trips, char *why, size_t why_size);

typedef struct tc_kernel tc_kernel;
struct tc_kernel {
    const ort_api *api;
    void *handle;
    int fd; /* the memfd the kernel was loaded from, or -1 */
    char *key;
    char *entry;
    int32_t num_inputs, num_outputs, num_tensors, num_temps, num_phases;
    const int32_t *dtypes, *ranks, *output_zero, *temp_zero;
    const int64_t *dims, *temp_bytes, *phase_trips;
    /* ABI 2: the fewest iterations of each phase worth the pool (NULL: any two are). */
    const int64_t *phase_least;
    const char *const *check_text;
    int32_t num_checks; /* entries of check_text; 0 when the kernel declares none */
    tc_phase_fn phase;
    /* ABI 2 (abi == TC_SIZES_ABI_VERSION): dims, temp_bytes, phase_trips, tensor_bytes and
     * sizes are those of one run, in a copy of the kernel made for it (run_every_size). */
    int32_t abi, num_sizes;
    int32_t every_size; /* the node's every_size attribute: its kernel must be ABI 2 */
    /* A node for every size's kernels specialised to some sizes (every_size_at: num_sizes
     * values each), run where a run's sizes are exactly theirs; a specialised kernel has
     * `special` set (its node's shapes are the sample's, not its own). */
    int32_t num_special, special;
    int64_t *special_sizes;
    tc_kernel *specials;
    /* Its other kernels for every size (every_size_from: the sizes where each made its
     * choices, num_sizes values each, this kernel's first), each run at the sizes nearer
     * its own than any other's. */
    int32_t num_others;
    int64_t *from_sizes;
    tc_kernel *others;
    tc_sized_phase_fn sized_phase;
    tc_shapes_fn shapes;
    const int64_t *sizes;
    int64_t *dims_offset; /* where each tensor's dimensions start in dims */
    size_t *tensor_bytes; /* bytes of each tensor */
    /* A rows node (docs/onnx.md): one kernel per entry of row_sizes, which descend to 1;
     * row_flags says which inputs and outputs lead with the rows, and over how many
     * dimensions (their product is the rows; each kernel has its rows in the first and 1
     * in the others). This kernel then only holds them (num_rows is 0 for a fixed-shape
     * node, which is its own kernel). */
    int32_t num_rows;
    int64_t *row_sizes, *row_flags;
    tc_kernel *variants;
    /* Per input, the data of a constant initializer, its element type and dimensions
     * checked once when the node's kernel is made (NULL: read on every run), and in a
     * kernel for every size those dimensions (at dims_offset); a rows node's kernels
     * share their head's (own_constant). */
    void **constant;
    int64_t *constant_dims;
    int own_constant;
};

/* The leading dimensions of a rows node's run (its first input that has them) and their
 * product; n is 0 for a tensor without them. */
typedef struct {
    int32_t n;
    int64_t dims[TC_MAX_LEAD];
    int64_t rows;
} tc_lead;

/* What one chunked phase shares between the pool's threads (lives on the run's stack). */
typedef struct {
    const tc_kernel *kernel;
    int32_t phase;
    void *const *args;
    void *const *temps;
    int64_t trips;
    int64_t chunks;
    int code;      /* first nonzero return code, set once with a compare-and-swap */
    int64_t value; /* the offending index of that code */
} tc_run;

static size_t element_size(int32_t dtype) {
    switch (dtype) {
    case 2: case 3: case 9: return 1;             /* uint8 int8 bool */
    case 4: case 5: case 10: case 16: return 2;   /* uint16 int16 float16 bfloat16 */
    case 1: case 6: case 12: return 4;            /* float int32 uint32 */
    case 7: case 11: case 13: case 14: return 8;  /* int64 double uint64 complex64 */
    case 15: return 16;                           /* complex128 */
    default: return 0;                            /* string, sub-byte and unknown types */
    }
}

static const char *dtype_name(int32_t dtype) {
    static const char *const names[] = {
        "undefined", "float32", "uint8",  "int8",   "uint16",    "int16",      "int32",
        "int64",     "string",  "bool",   "float16", "float64",  "uint32",     "uint64",
        "complex64", "complex128", "bfloat16",
    };
    if (dtype >= 0 && dtype < (int32_t)(sizeof names / sizeof names[0])) return names[dtype];
    return "an unsupported type";
}

/* "(2, 3)": a shape the way NumPy prints it, truncated to the buffer. */
static void format_shape(char *buf, size_t size, const int64_t *dims, size_t rank) {
    size_t used = (size_t)snprintf(buf, size, "(");
    for (size_t d = 0; d < rank && used < size; d++)
        used += (size_t)snprintf(buf + used, size - used, d ? ", %" PRId64 : "%" PRId64, dims[d]);
    if (used < size) used += (size_t)snprintf(buf + used, size - used, rank == 1 ? ",)" : ")");
}

static ort_status *error(const ort_api *api, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static ort_status *error(const ort_api *api, int code, const char *fmt, ...) {
    char msg[TC_MESSAGE_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ORT_CALL(api, SLOT_CREATE_STATUS, create_status_fn)(code, msg);
}

static void release_status(const ort_api *api, ort_status *status) {
    if (status) ORT_CALL(api, SLOT_RELEASE_STATUS, release_status_fn)(status);
}

/* ------------------------------------------------------------------------------ sha256 */

/* SHA-256 (FIPS 180-4), written here so the library needs nothing beyond libc and libdl:
 * it hashes the kernel.so bytes it loads and the node attributes its key names. */
typedef struct {
    uint32_t h[8];
    uint64_t bytes;
    unsigned char block[64];
    size_t used;
} tc_sha256;

static const uint32_t sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2,
};

static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void sha256_block(tc_sha256 *s, const unsigned char *p) {
    uint32_t w[64], v[8];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    memcpy(v, s->h, sizeof v);
    for (int i = 0; i < 64; i++) {
        uint32_t e = v[4], a = v[0];
        uint32_t t1 = v[7] + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & v[5]) ^ (~e & v[6])) +
                      sha256_k[i] + w[i];
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) +
                      ((a & v[1]) ^ (a & v[2]) ^ (v[1] & v[2]));
        memmove(v + 1, v, 7 * sizeof v[0]);
        v[4] += t1;
        v[0] = t1 + t2;
    }
    for (int i = 0; i < 8; i++) s->h[i] += v[i];
}

static void sha256_init(tc_sha256 *s) {
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, h0, sizeof h0);
    s->bytes = 0;
    s->used = 0;
}

static void sha256_update(tc_sha256 *s, const void *data, size_t n) {
    const unsigned char *p = data;
    s->bytes += n;
    while (n > 0) {
        size_t take = 64 - s->used < n ? 64 - s->used : n;
        memcpy(s->block + s->used, p, take);
        s->used += take;
        p += take;
        n -= take;
        if (s->used == 64) {
            sha256_block(s, s->block);
            s->used = 0;
        }
    }
}

/* The digest as 64 lowercase hex digits and a NUL. */
static void sha256_hex(tc_sha256 *s, char out[65]) {
    uint64_t bits = s->bytes * 8;
    unsigned char pad[72] = {0x80};
    size_t n = (s->used < 56 ? 56 : 120) - s->used;
    for (int i = 0; i < 8; i++) pad[n + (size_t)i] = (unsigned char)(bits >> (56 - 8 * i));
    sha256_update(s, pad, n + 8);
    for (int i = 0; i < 8; i++) snprintf(out + 8 * i, 9, "%08x", s->h[i]);
}

/* --------------------------------------------------------------------- kernel creation */

/* A string attribute in fresh malloc'd memory (NUL-terminated; its length, which counts
 * any NUL bytes inside it, in *length when not NULL), or NULL with *status set. */
static char *string_attribute(const ort_api *api, const ort_kernel_info *info, const char *name,
                              size_t *length, ort_status **status) {
    attr_string_fn get = ORT_CALL(api, SLOT_KERNEL_INFO_GET_ATTRIBUTE_STRING, attr_string_fn);
    size_t size = 0;
    ort_status *st = get(info, name, NULL, &size);
    if (st) {
        release_status(api, st);
        *status = error(api, ORT_INVALID_ARGUMENT,
                        "tc_graph: the TcKernel node has no string attribute '%s'", name);
        return NULL;
    }
    char *text = calloc(size + 1, 1);
    if (!text) {
        *status = error(api, ORT_FAIL, "tc_graph: out of memory reading attribute '%s'", name);
        return NULL;
    }
    st = get(info, name, text, &size);
    if (st) {
        free(text);
        *status = st;
        return NULL;
    }
    if (length) *length = size ? size - 1 : 0; /* size counts the terminating NUL */
    return text;
}

/* An ints attribute in fresh malloc'd memory; NULL with *count 0 when the node lacks it. */
static int64_t *ints_attribute(const ort_api *api, const ort_kernel_info *info, const char *name,
                               size_t *count) {
    attr_ints_fn get = ORT_CALL(api, SLOT_KERNEL_INFO_GET_ATTRIBUTE_ARRAY_INT64, attr_ints_fn);
    *count = 0;
    size_t size = 0;
    ort_status *st = get(info, name, NULL, &size);
    if (st) {
        release_status(api, st);
        return NULL;
    }
    int64_t *values = calloc(size ? size : 1, sizeof *values);
    if (!values) return NULL;
    if (size) {
        st = get(info, name, values, &size);
        if (st) {
            release_status(api, st);
            free(values);
            return NULL;
        }
    }
    *count = size;
    return values;
}

/* Cache keys name directories: same rule as cc.py (no separators, no leading dot). */
static int valid_key(const char *key) {
    size_t n = strlen(key);
    if (n == 0 || n > 128 || key[0] == '.' || key[0] == '-') return 0;
    for (size_t i = 0; i < n; i++) {
        char c = key[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '.' || c == '-';
        if (!ok) return 0;
    }
    return 1;
}

/* The home directory for "~": $HOME, else the password database. */
static const char *home_dir(char *buf, size_t size) {
    const char *home = getenv("HOME");
    if (home && *home) return home;
    struct passwd pw, *found = NULL;
    if (getpwuid_r(getuid(), &pw, buf, size, &found) == 0 && found && found->pw_dir)
        return found->pw_dir;
    return "";
}

/* <dir>/<key> when a kernel directory is named (kernel_dir), else <cache>/<key> with the
 * cache found as tc_graph.runtime.cc.cache_dir finds it: TC_GRAPH_CACHE (with ~ expanded),
 * else $XDG_CACHE_HOME/tc_graph, else ~/.cache/tc_graph. Returns 0 when the path does not
 * fit. */
static int entry_path(char *out, size_t size, const char *dir, const char *key) {
    char pwbuf[4096];
    const char *override = getenv("TC_GRAPH_CACHE");
    const char *xdg = getenv("XDG_CACHE_HOME");
    int n;
    if (dir) {
        n = snprintf(out, size, "%s/%s", dir, key);
    } else if (override && *override) {
        if (override[0] == '~' && (override[1] == '/' || override[1] == '\0'))
            n = snprintf(out, size, "%s%s/%s", home_dir(pwbuf, sizeof pwbuf), override + 1,
                         key);
        else
            n = snprintf(out, size, "%s/%s", override, key);
    } else if (xdg && *xdg) {
        if (xdg[0] == '~' && (xdg[1] == '/' || xdg[1] == '\0'))
            n = snprintf(out, size, "%s%s/tc_graph/%s", home_dir(pwbuf, sizeof pwbuf),
                         xdg + 1, key);
        else
            n = snprintf(out, size, "%s/tc_graph/%s", xdg, key);
    } else {
        n = snprintf(out, size, "%s/.cache/tc_graph/%s", home_dir(pwbuf, sizeof pwbuf), key);
    }
    return n > 0 && (size_t)n < size;
}

/* The kernel directory a deployed model names, in out (NUL-terminated): the session config
 * entry tc_graph.kernel_dir (readable from API 24 on), else $TC_GRAPH_KERNEL_DIR. *from says
 * which; NULL (and no error) when neither is set: the kernels come from the cache. */
static ort_status *kernel_dir(const tc_op *op, const ort_api *api, const ort_kernel_info *info,
                              char *out, size_t size, const char **from) {
    *from = NULL;
    if (op->version >= 24) {
        ort_key_values *entries = NULL;
        ort_status *st = ORT_CALL(api, SLOT_KERNEL_INFO_GET_CONFIG_ENTRIES, config_entries_fn)(
            info, &entries);
        if (st) return st;
        const char *value =
            ORT_CALL(api, SLOT_GET_KEY_VALUE, get_key_value_fn)(entries, TC_KERNEL_DIR_CONFIG);
        int fits = value && *value && strlen(value) < size;
        if (fits) snprintf(out, size, "%s", value);
        if (value && *value) *from = "the session config entry " TC_KERNEL_DIR_CONFIG;
        ORT_CALL(api, SLOT_RELEASE_KEY_VALUE_PAIRS, release_key_values_fn)(entries);
        if (*from && !fits)
            return error(api, ORT_INVALID_ARGUMENT,
                         "tc_graph: the session config entry " TC_KERNEL_DIR_CONFIG
                         " is longer than %zu bytes", size - 1);
        if (*from) return NULL;
    }
    const char *env = getenv(TC_KERNEL_DIR_ENV);
    if (!env || !*env) return NULL;
    if (strlen(env) >= size)
        return error(api, ORT_INVALID_ARGUMENT,
                     "tc_graph: " TC_KERNEL_DIR_ENV " is longer than %zu bytes", size - 1);
    snprintf(out, size, "%s", env);
    *from = "the environment variable " TC_KERNEL_DIR_ENV;
    return NULL;
}

/* ----------------------------------------------------------------------- CPU features */

/* Whether this CPU has one feature a kernel's meta.json names (cc.py's _X86_FEATURES):
 * 1 yes, 0 no, -1 a name this library cannot check (the kernel is then refused too).
 * __builtin_cpu_supports takes only a literal, hence the table. */
static int cpu_has(const char *name) {
#if defined(__x86_64__) || defined(__i386__)
#define TC_FEATURE(lit) {lit, __builtin_cpu_supports(lit)}
    __builtin_cpu_init();
    const struct {
        const char *name;
        int has;
    } table[] = {
        TC_FEATURE("sse3"),      TC_FEATURE("ssse3"),        TC_FEATURE("sse4.1"),
        TC_FEATURE("sse4.2"),    TC_FEATURE("sse4a"),        TC_FEATURE("popcnt"),
        TC_FEATURE("lzcnt"),     TC_FEATURE("movbe"),        TC_FEATURE("bmi"),
        TC_FEATURE("bmi2"),      TC_FEATURE("aes"),          TC_FEATURE("pclmul"),
        TC_FEATURE("sha"),       TC_FEATURE("xsave"),        TC_FEATURE("f16c"),
        TC_FEATURE("fma"),       TC_FEATURE("fma4"),         TC_FEATURE("avx"),
        TC_FEATURE("avx2"),      TC_FEATURE("avxvnni"),      TC_FEATURE("gfni"),
        TC_FEATURE("vpclmulqdq"), TC_FEATURE("avx512f"),     TC_FEATURE("avx512bw"),
        TC_FEATURE("avx512cd"),  TC_FEATURE("avx512dq"),     TC_FEATURE("avx512vl"),
        TC_FEATURE("avx512vnni"), TC_FEATURE("avx512bf16"),  TC_FEATURE("avx512fp16"),
        TC_FEATURE("avx512vbmi"), TC_FEATURE("avx512vbmi2"), TC_FEATURE("avx512ifma"),
        TC_FEATURE("avx512bitalg"), TC_FEATURE("avx512vpopcntdq"),
    };
#undef TC_FEATURE
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].name, name) == 0) return table[i].has != 0;
#endif
    (void)name;
    return -1;
}

/* The features of a space-separated list that this CPU lacks, space-separated in missing
 * (empty when it has them all). */
static void missing_features(const char *features, char *missing, size_t size) {
    size_t used = 0;
    missing[0] = 0;
    const char *p = features;
    while (*p) {
        while (*p == ' ') p++;
        size_t n = strcspn(p, " ");
        if (n == 0) break;
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(n < 63 ? n : 63), p);
        if (cpu_has(name) != 1 && used < size)
            used += (size_t)snprintf(missing + used, size - used, used ? " %s" : "%s", name);
        p += n;
    }
}

/* --------------------------------------------------------------- the key and the cache */

/* The kernel_key rule shared with tc_graph/graph/rewrite.py (kernel_key): "tck-" and the
 * first 40 hex digits of the sha256 of these parts, each preceded by its length in 8
 * little-endian bytes; int lists are hashed as decimal text joined by commas. */
#define TC_KEY_TAG "tc_graph TcKernel key 1"
static const char *const key_strings[3] = {"source", "entry", "options"};
static const char *const key_ints[6] = {"input_dtypes",  "input_ranks",  "input_shapes",
                                        "output_dtypes", "output_ranks", "output_shapes"};

static void hash_part(tc_sha256 *s, const void *data, size_t n) {
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)n >> (8 * i));
    sha256_update(s, len, sizeof len);
    sha256_update(s, data, n);
}

/* Hash one ints attribute as its text; 0 when the node lacks it. */
static int hash_ints(const ort_api *api, const ort_kernel_info *info, const char *name,
                     tc_sha256 *s) {
    size_t n = 0;
    int64_t *values = ints_attribute(api, info, name, &n);
    if (!values) return 0;
    char *text = malloc(n * 22 + 1);
    if (!text) {
        free(values);
        return 0;
    }
    size_t used = 0;
    for (size_t i = 0; i < n; i++)
        used += (size_t)snprintf(text + used, 22, i ? ",%" PRId64 : "%" PRId64, values[i]);
    hash_part(s, text, used);
    free(text);
    free(values);
    return 1;
}

/* The node's kernel_key must be the one its attributes give: a key names its content. */
static ort_status *check_key(const tc_kernel *k, const ort_kernel_info *info) {
    tc_sha256 s;
    sha256_init(&s);
    hash_part(&s, TC_KEY_TAG, strlen(TC_KEY_TAG));
    for (int i = 0; i < 3; i++) {
        ort_status *st = NULL;
        size_t n = 0;
        char *text = string_attribute(k->api, info, key_strings[i], &n, &st);
        if (!text) return st;
        hash_part(&s, text, n);
        free(text);
    }
    for (int i = 0; i < 6; i++)
        if (!hash_ints(k->api, info, key_ints[i], &s))
            return error(k->api, ORT_INVALID_ARGUMENT,
                         "tc_graph kernel '%s': the TcKernel node has no ints attribute '%s'",
                         k->entry, key_ints[i]);
    /* A node for every size says so in its key (every_size, docs/onnx.md). */
    if (k->every_size && !hash_ints(k->api, info, "every_size", &s))
        return error(k->api, ORT_FAIL, "tc_graph: out of memory");
    if (k->special_sizes && !hash_ints(k->api, info, "every_size_at", &s))
        return error(k->api, ORT_FAIL, "tc_graph: out of memory");
    if (k->from_sizes && !hash_ints(k->api, info, "every_size_from", &s))
        return error(k->api, ORT_FAIL, "tc_graph: out of memory");
    /* A rows node's sizes and flags are part of what its key names, and so are the sources
     * of its other sizes, where it has them (row_source_<rows>). */
    if (k->num_rows && (!hash_ints(k->api, info, "row_sizes", &s) ||
                        !hash_ints(k->api, info, "row_tensors", &s)))
        return error(k->api, ORT_FAIL, "tc_graph: out of memory");
    for (int32_t i = 1; i < k->num_rows; i++) {
        char name[48];
        snprintf(name, sizeof name, "row_source_%" PRId64, k->row_sizes[i]);
        ort_status *absent = NULL;
        size_t n = 0;
        char *text = string_attribute(k->api, info, name, &n, &absent);
        if (!text) {
            release_status(k->api, absent);
            continue;
        }
        hash_part(&s, name, strlen(name));
        hash_part(&s, text, n);
        free(text);
    }
    char hex[65], want[64];
    sha256_hex(&s, hex);
    snprintf(want, sizeof want, "tck-%.40s", hex);
    if (strcmp(want, k->key) == 0) return NULL;
    return error(k->api, ORT_INVALID_ARGUMENT,
                 "tc_graph kernel '%s': the node's kernel_key %s does not match its attributes "
                 "(they give %s): the model was edited or made by another tc_graph version; "
                 "re-run tc_graph.optimize on the original model",
                 k->entry, k->key, want);
}

#define TC_MAX_KERNEL_BYTES ((size_t)256 << 20) /* same bounds as cc.py */
#define TC_MAX_META_BYTES ((size_t)64 << 10)

/* The bytes of a regular file (a symlink, device or FIFO is refused) of at most max bytes,
 * in fresh malloc'd memory with a NUL after them; NULL with *why filled on failure. */
static unsigned char *read_regular(const char *path, size_t max, size_t *size, char *why,
                                   size_t why_size) {
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        snprintf(why, why_size, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    unsigned char *data = NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(why, why_size, "%s is not a regular file", path);
    } else if ((uint64_t)st.st_size > max) {
        snprintf(why, why_size, "%s is larger than %zu bytes", path, max);
    } else if (!(data = malloc((size_t)st.st_size + 1))) {
        snprintf(why, why_size, "out of memory reading %s", path);
    } else {
        size_t got = 0, want = (size_t)st.st_size;
        ssize_t n = 1;
        while (got < want && (n = read(fd, data + got, want - got)) > 0) got += (size_t)n;
        if (got != want || read(fd, &(char){0}, 1) != 0) {
            snprintf(why, why_size, "%s changed while it was read", path);
            free(data);
            data = NULL;
        } else {
            data[got] = 0;
            *size = got;
        }
    }
    close(fd);
    return data;
}

/* The string value of "name" in meta.json's text (tc_graph writes it; no escapes). */
static int meta_string(const char *meta, const char *name, char *out, size_t size) {
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\"", name);
    const char *p = strstr(meta, quoted);
    if (!p) return 0;
    p += strlen(quoted);
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') p++;
    if (*p++ != ':') return 0;
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') p++;
    if (*p++ != '"') return 0;
    const char *end = strchr(p, '"');
    if (!end || (size_t)(end - p) >= size) return 0;
    memcpy(out, p, (size_t)(end - p));
    out[end - p] = 0;
    return 1;
}

/* Mark a loaded OpenMP runtime never to be unloaded: its worker threads outlive the kernel
 * that pulled it in, and unloading it under them crashes the process (cc.py does the same). */
static void pin_openmp(void) {
    static const char *const names[] = {"libgomp.so.1", "libomp.so", "libomp.so.5", "libiomp5.so"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
        if (h) dlclose(h);
    }
}

/* dlopen exactly these bytes: written to an anonymous memfd, so nothing on disk can be
 * swapped in between the check and the load. The memfd stays open (in *fd) until after
 * the dlclose: dlopen finds a loaded object by its name, /proc/self/fd/N, so N must not be
 * reused while the object lives. NULL with *why filled on failure. */
static void *dlopen_bytes(const unsigned char *data, size_t size, int *fd_out, char *why,
                          size_t why_size) {
    int fd = memfd_create("tc_kernel", MFD_CLOEXEC);
    if (fd < 0) {
        snprintf(why, why_size, "memfd_create: %s", strerror(errno));
        return NULL;
    }
    size_t done = 0;
    ssize_t n = 1;
    while (done < size && (n = write(fd, data + done, size - done)) > 0) done += (size_t)n;
    void *handle = NULL;
    if (done != size) {
        snprintf(why, why_size, "cannot write a memfd: %s", strerror(errno));
    } else {
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!handle) {
            const char *e = dlerror();
            snprintf(why, why_size, "%s", e ? e : "dlopen failed");
        }
    }
    if (handle) {
        *fd_out = fd;
        pin_openmp();
    } else {
        close(fd);
    }
    return handle;
}

/* Why load_verified returned no kernel. */
enum { TC_LOAD_DAMAGED = 1, TC_LOAD_MISSING = 2, TC_LOAD_CPU = 3 };

/* Load <entry>/kernel.so after checking <entry>/meta.json names this key and the sha256 of
 * the very bytes loaded, and that this CPU has every feature meta.json's cpu_features names
 * (a kernel built with -march=x86-64-v4 on an AVX2 machine would die of an illegal
 * instruction). NULL with *why filled and *kind set (TC_LOAD_*) on failure. */
static void *load_verified(const char *entry, const char *key, int *fd, int *kind, char *why,
                           size_t why_size) {
    char path[4200];
    size_t meta_size = 0, so_size = 0;
    snprintf(path, sizeof path, "%s/meta.json", entry);
    *kind = access(entry, F_OK) != 0 ? TC_LOAD_MISSING : TC_LOAD_DAMAGED;
    unsigned char *meta = read_regular(path, TC_MAX_META_BYTES, &meta_size, why, why_size);
    if (!meta) return NULL;
    char meta_key[160], meta_sha[80], sha[65], features[1024], missing[1024];
    int named = meta_string((const char *)meta, "key", meta_key, sizeof meta_key) &&
                meta_string((const char *)meta, "sha256", meta_sha, sizeof meta_sha);
    int featured = meta_string((const char *)meta, "cpu_features", features, sizeof features);
    int listed = featured || !strstr((const char *)meta, "\"cpu_features\"");
    free(meta);
    if (!named || !listed || strcmp(meta_key, key) != 0) {
        snprintf(why, why_size, "%.300s does not describe the kernel %.130s", path, key);
        return NULL;
    }
    missing_features(featured ? features : "", missing, sizeof missing);
    if (missing[0]) {
        *kind = TC_LOAD_CPU;
        snprintf(why, why_size, "%.400s", missing);
        return NULL;
    }
    snprintf(path, sizeof path, "%s/kernel.so", entry);
    unsigned char *so = read_regular(path, TC_MAX_KERNEL_BYTES, &so_size, why, why_size);
    if (!so) return NULL;
    tc_sha256 s;
    sha256_init(&s);
    sha256_update(&s, so, so_size);
    sha256_hex(&s, sha);
    void *handle = NULL;
    if (strcmp(sha, meta_sha) != 0)
        snprintf(why, why_size, "%.300s does not match the sha256 in its meta.json", path);
    else
        handle = dlopen_bytes(so, so_size, fd, why, why_size);
    free(so);
    return handle;
}


/* The address of a kernel symbol, or NULL with *status naming the stale object and the fix. */
static const void *kernel_symbol(tc_kernel *k, const char *name, ort_status **status) {
    const void *p = dlsym(k->handle, name);
    if (!p && !*status)
        *status = error(k->api, ORT_FAIL,
                        "tc_graph kernel '%s' (key %s) lacks the symbol %s: it was compiled by "
                        "another tc_graph version; run `tc-graph cache clear` and then "
                        "tc_graph.prepare(model) or `tc-graph prepare MODEL.onnx`",
                        k->entry, k->key, name);
    return p;
}

/* One of the node's ints attributes against the kernel's metadata. */
static ort_status *check_ints(tc_kernel *k, const ort_kernel_info *info, const char *name,
                              const int64_t *expected, size_t count) {
    size_t n = 0;
    int64_t *got = ints_attribute(k->api, info, name, &n);
    if (!got)
        return error(k->api, ORT_INVALID_ARGUMENT,
                     "tc_graph kernel '%s': cannot read the ints attribute '%s'", k->entry, name);
    int same = n == count;
    for (size_t i = 0; same && i < n; i++) same = got[i] == expected[i];
    free(got);
    if (same) return NULL;
    return error(k->api, ORT_INVALID_ARGUMENT,
                 "tc_graph kernel '%s' (key %s): the node's %s attribute does not match the "
                 "compiled kernel; run tc_graph.prepare(model) or `tc-graph prepare MODEL.onnx` "
                 "again, or re-run tc_graph.optimize",
                 k->entry, k->key, name);
}

/* A rows node's kernel leads with its own row count in every flagged tensor (then 1 in the
 * other dimensions of the rows), where the node's shapes, those of its first kernel, have
 * row_sizes[0]: the dimensions the node should then give, in values (0 when the kernel
 * has other leading dimensions). */
static int node_dims(const tc_kernel *k, const tc_kernel *head, int64_t rows, int64_t *values) {
    for (int32_t t = 0; t < k->num_tensors; t++) {
        int64_t lo = k->dims_offset[t];
        for (int64_t d = lo; d < k->dims_offset[t + 1]; d++) values[d] = k->dims[d];
        int64_t n = head ? head->row_flags[t] : 0;
        if (!n) continue;
        if (k->ranks[t] < n || k->dims[lo] != rows) return 0;
        for (int64_t d = 1; d < n; d++)
            if (k->dims[lo + d] != 1) return 0;
        values[lo] = head->row_sizes[0];
    }
    return 1;
}

/* The node's attributes (dtypes, ranks, shapes of inputs or outputs) against the metadata
 * of its kernel for `rows` rows (head: the rows node; NULL for a fixed-shape one). */
static ort_status *check_node(tc_kernel *k, const ort_kernel_info *info, const tc_kernel *head,
                              int64_t rows) {
    size_t n_in = 0, n_out = 0;
    ort_status *st = ORT_CALL(k->api, SLOT_KERNEL_INFO_GET_INPUT_COUNT, info_count_fn)(info, &n_in);
    if (st) return st;
    st = ORT_CALL(k->api, SLOT_KERNEL_INFO_GET_OUTPUT_COUNT, info_count_fn)(info, &n_out);
    if (st) return st;
    if (n_in != (size_t)k->num_inputs || n_out != (size_t)k->num_outputs)
        return error(k->api, ORT_INVALID_ARGUMENT,
                     "tc_graph kernel '%s' (key %s) takes %d inputs and %d outputs, the node "
                     "has %zu and %zu",
                     k->entry, k->key, k->num_inputs, k->num_outputs, n_in, n_out);

    int32_t tensors = k->num_tensors;
    int64_t *values = calloc((size_t)tensors + (size_t)k->dims_offset[tensors] + 1, sizeof *values);
    if (!values) return error(k->api, ORT_FAIL, "tc_graph: out of memory");
    int64_t *dims = values + tensors;
    int shaped = k->abi == TC_ABI_VERSION && !k->special;
    if (shaped && !node_dims(k, head, rows, dims)) {
        free(values);
        return error(k->api, ORT_INVALID_ARGUMENT,
                     "tc_graph kernel '%s' (key %s) is not the node's kernel for %" PRId64
                     " rows; run tc_graph.prepare(model) again, or re-run tc_graph.optimize",
                     k->entry, k->key, rows);
    }
    static const char *const names[2][3] = {
        {"input_dtypes", "input_ranks", "input_shapes"},
        {"output_dtypes", "output_ranks", "output_shapes"},
    };
    for (int side = 0; side < 2 && !st; side++) {
        int32_t first = side ? k->num_inputs : 0;
        int32_t count = side ? k->num_outputs : k->num_inputs;
        for (int32_t i = 0; i < count; i++) values[i] = k->dtypes[first + i];
        st = check_ints(k, info, names[side][0], values, (size_t)count);
        if (st) break;
        for (int32_t i = 0; i < count; i++) values[i] = k->ranks[first + i];
        st = check_ints(k, info, names[side][1], values, (size_t)count);
        if (st) break;
        int64_t lo = k->dims_offset[first], hi = k->dims_offset[first + count];
        /* A kernel for every size has no shapes, and a specialised one its own: the node's
         * are the sample's. */
        if (shaped) st = check_ints(k, info, names[side][2], dims + lo, (size_t)(hi - lo));
    }
    free(values);
    return st;
}

/* Each tensor's element type and rank checked, where its dimensions start, and (ABI 1)
 * its bytes. */
static ort_status *load_layout(tc_kernel *k) {
    k->num_tensors = k->num_inputs + k->num_outputs;
    k->dims_offset = calloc((size_t)k->num_tensors + 1, sizeof *k->dims_offset);
    k->tensor_bytes = calloc((size_t)k->num_tensors + 1, sizeof *k->tensor_bytes);
    if (!k->dims_offset || !k->tensor_bytes)
        return error(k->api, ORT_FAIL, "tc_graph: out of memory");
    for (int32_t t = 0; t < k->num_tensors; t++) {
        int32_t rank = k->ranks[t];
        size_t size = element_size(k->dtypes[t]);
        const char *what = t < k->num_inputs ? "input" : "output";
        int32_t index = t < k->num_inputs ? t : t - k->num_inputs;
        if (size == 0)
            return error(k->api, ORT_FAIL, "tc_graph kernel '%s' (key %s): %s %d has %s (%d)",
                         k->entry, k->key, what, index, dtype_name(k->dtypes[t]),
                         (int)k->dtypes[t]);
        if (rank < 0 || rank > TC_MAX_RANK)
            return error(k->api, ORT_FAIL,
                         "tc_graph kernel '%s' (key %s): %s %d has rank %d (at most %d)",
                         k->entry, k->key, what, index, (int)rank, TC_MAX_RANK);
        k->dims_offset[t + 1] = k->dims_offset[t] + rank;
        if (k->abi != TC_ABI_VERSION) continue; /* sized per run */
        const int64_t *dims = k->dims + k->dims_offset[t];
        for (int32_t d = 0; d < rank; d++) {
            if (dims[d] < 0 || (dims[d] > 0 && size > SIZE_MAX / (size_t)dims[d]))
                return error(k->api, ORT_FAIL, "tc_graph kernel '%s' (key %s) has corrupt "
                             "dimensions", k->entry, k->key);
            size *= (size_t)dims[d];
        }
        k->tensor_bytes[t] = size;
    }
    return NULL;
}

/* Read the kernel's metadata (ABI 1, or 2 for a kernel for every size), check it is
 * sane, and precompute offsets and byte sizes. */
static ort_status *load_metadata(tc_kernel *k) {
    ort_status *st = NULL;
    const int32_t *abi = kernel_symbol(k, "tc_abi_version", &st);
    if (st) return st;
    if (*abi != TC_ABI_VERSION && *abi != TC_SIZES_ABI_VERSION)
        return error(k->api, ORT_FAIL,
                     "tc_graph kernel '%s' (key %s) has ABI version %d, this library expects "
                     "%d or %d: run `tc-graph cache clear` and prepare the model again",
                     k->entry, k->key, (int)*abi, TC_ABI_VERSION, TC_SIZES_ABI_VERSION);
    k->abi = *abi;
    const int32_t *n_in = kernel_symbol(k, "tc_num_inputs", &st);
    const int32_t *n_out = kernel_symbol(k, "tc_num_outputs", &st);
    const int32_t *n_temps = kernel_symbol(k, "tc_num_temps", &st);
    const int32_t *n_phases = kernel_symbol(k, "tc_num_phases", &st);
    const int32_t *n_sizes = NULL;
    k->dtypes = kernel_symbol(k, "tc_dtypes", &st);
    k->ranks = kernel_symbol(k, "tc_ranks", &st);
    k->output_zero = kernel_symbol(k, "tc_output_zero", &st);
    if (k->abi == TC_ABI_VERSION) {
        k->dims = kernel_symbol(k, "tc_dims", &st);
        k->phase_trips = kernel_symbol(k, "tc_phase_trips", &st);
        k->phase = (tc_phase_fn)(uintptr_t)kernel_symbol(k, "tc_phase", &st);
    } else {
        n_sizes = kernel_symbol(k, "tc_num_sizes", &st);
        k->shapes = (tc_shapes_fn)(uintptr_t)kernel_symbol(k, "tc_shapes", &st);
        k->sized_phase = (tc_sized_phase_fn)(uintptr_t)kernel_symbol(k, "tc_phase", &st);
        k->phase_least = dlsym(k->handle, "tc_phase_least"); /* optional: older kernels */
    }
    if (st) return st;
    k->num_inputs = *n_in;
    k->num_outputs = *n_out;
    k->num_temps = *n_temps;
    k->num_phases = *n_phases;
    k->num_sizes = n_sizes ? *n_sizes : 0;
    /* Arrays of a count that is zero may be left out by the generator. */
    if (k->num_temps > 0) {
        if (k->abi == TC_ABI_VERSION) k->temp_bytes = kernel_symbol(k, "tc_temp_bytes", &st);
        k->temp_zero = kernel_symbol(k, "tc_temp_zero", &st);
        if (st) return st;
    }
    k->check_text = dlsym(k->handle, "tc_check_text");
    const int32_t *n_checks = dlsym(k->handle, "tc_num_checks");
    k->num_checks = k->check_text && n_checks && *n_checks > 0 ? *n_checks : 0;
    if (k->num_inputs < 0 || k->num_outputs < 1 || k->num_temps < 0 || k->num_phases < 0 ||
        k->num_inputs > 65536 || k->num_outputs > 65536 || k->num_temps > 65536 ||
        k->num_phases > 65536 || k->num_sizes < 0 || k->num_sizes > 65536)
        return error(k->api, ORT_FAIL, "tc_graph kernel '%s' (key %s) has corrupt metadata",
                     k->entry, k->key);
    return load_layout(k);
}

/* Why a kernel could not be loaded, with the fix: a deployed model (from says which kernel
 * directory it named) is packaged again, a cached one is prepared again. */
static ort_status *load_error(const tc_kernel *k, int kind, const char *entry, const char *from,
                              const char *why) {
    const ort_api *api = k->api;
    if (kind == TC_LOAD_CPU)
        return error(api, ORT_FAIL,
                     "tc_graph kernel '%s' (key %s) needs CPU features this CPU lacks: %s; "
                     "package the model again for this CPU with a lower --isa (e.g. `tc-graph "
                     "package MODEL.onnx -o DIR --isa x86-64-v2`, or --isa native on this "
                     "machine) (kernel %s)",
                     k->entry, k->key, why, entry);
    if (from && kind == TC_LOAD_MISSING)
        return error(api, ORT_FAIL,
                     "tc_graph kernel '%s' (key %s) is not in the kernel directory named by %s "
                     "(looked for %s): package the model again with `tc-graph package "
                     "MODEL.onnx -o DIR` and name DIR/kernels",
                     k->entry, k->key, from, entry);
    if (from)
        return error(api, ORT_FAIL,
                     "tc_graph kernel '%s' (key %s): refusing to load it from the kernel "
                     "directory named by %s: %s; package the model again with `tc-graph "
                     "package MODEL.onnx -o DIR`",
                     k->entry, k->key, from, why);
    if (kind == TC_LOAD_MISSING)
        return error(api, ORT_FAIL,
                     "tc_graph kernel '%s' (key %s) is not compiled on this machine: run "
                     "tc_graph.prepare(model) or `tc-graph prepare MODEL.onnx`, or open the "
                     "model with tc_graph.InferenceSession (looked for %s); a model made by "
                     "`tc-graph package` names its kernels with the session config entry "
                     TC_KERNEL_DIR_CONFIG,
                     k->entry, k->key, entry);
    return error(api, ORT_FAIL,
                 "tc_graph kernel '%s' (key %s): refusing to load the cache entry: %s; run "
                 "tc_graph.prepare(model) or `tc-graph prepare MODEL.onnx` to rebuild it",
                 k->entry, k->key, why);
}

/* Load the cache entry of k->key and check it: the entry against its meta.json (then the
 * load), the kernel's metadata, the node against the metadata (for `rows` rows of a rows
 * node `head`; NULL for a fixed-shape node). */
static ort_status *load_kernel(tc_kernel *k, const tc_op *op, const ort_kernel_info *info,
                               const tc_kernel *head, int64_t rows) {
    char dir[4096], entry[4096], why[TC_MESSAGE_BYTES / 2];
    const char *from = NULL;
    ort_status *st = kernel_dir(op, k->api, info, dir, sizeof dir, &from);
    if (st) return st;
    int kind = 0;
    if (!entry_path(entry, sizeof entry, from ? dir : NULL, k->key))
        return error(k->api, ORT_FAIL,
                     "tc_graph kernel '%s' (key %s): the kernel path is too long", k->entry,
                     k->key);
    k->handle = load_verified(entry, k->key, &k->fd, &kind, why, sizeof why);
    if (k->handle) {
        st = load_metadata(k);
        if (!st && (k->abi == TC_SIZES_ABI_VERSION) != (head ? 0 : k->every_size))
            st = error(k->api, ORT_INVALID_ARGUMENT,
                       "tc_graph kernel '%s' (key %s) is %s, the node %s; run "
                       "tc_graph.prepare(model) again, or re-run tc_graph.optimize",
                       k->entry, k->key,
                       k->abi == TC_SIZES_ABI_VERSION ? "a kernel for every size"
                                                      : "a kernel of fixed shapes",
                       k->every_size ? "serves every size" : "has fixed shapes");
        return st ? st : check_node(k, info, head, rows);
    }
    return load_error(k, kind, entry, from, why);
}

/* A rows node's sizes (positive, descending, the last 1) and flags (one per input and
 * output: 0, or how many leading dimensions the rows span, the same for all; every output
 * and at least one input lead with the rows). */
static ort_status *read_rows(tc_kernel *h, const ort_kernel_info *info) {
    size_t n_sizes = 0, n_flags = 0, n_in = 0, n_out = 0;
    h->row_sizes = ints_attribute(h->api, info, "row_sizes", &n_sizes);
    if (!h->row_sizes) return NULL; /* a fixed-shape node */
    h->row_flags = ints_attribute(h->api, info, "row_tensors", &n_flags);
    ort_status *st = ORT_CALL(h->api, SLOT_KERNEL_INFO_GET_INPUT_COUNT, info_count_fn)(info, &n_in);
    if (!st) st = ORT_CALL(h->api, SLOT_KERNEL_INFO_GET_OUTPUT_COUNT, info_count_fn)(info, &n_out);
    if (st) return st;
    int ok = n_sizes > 0 && n_sizes <= 64 && h->row_flags && n_flags == n_in + n_out &&
             h->row_sizes[n_sizes - 1] == 1;
    for (size_t i = 0; ok && i + 1 < n_sizes; i++) ok = h->row_sizes[i] > h->row_sizes[i + 1];
    int led = 0;
    int64_t span = ok && n_flags ? h->row_flags[n_flags - 1] : 0; /* an output's */
    ok = ok && span >= 1 && span <= TC_MAX_LEAD;
    for (size_t t = 0; ok && t < n_flags; t++) {
        ok = h->row_flags[t] == 0 || h->row_flags[t] == span;
        ok = ok && (t < n_in || h->row_flags[t]);
        led |= t < n_in && h->row_flags[t];
    }
    if (!ok || !led)
        return error(h->api, ORT_INVALID_ARGUMENT,
                     "tc_graph kernel '%s': the node's row_sizes and row_tensors attributes "
                     "are malformed; re-run tc_graph.optimize on the original model",
                     h->entry);
    h->num_rows = (int32_t)n_sizes;
    return NULL;
}

/* n kernels that hold nothing yet, each without a memfd (release_kernel closes only a
 * kernel's own: a kernel left unloaded after a failure once closed descriptor 0), or NULL. */
static tc_kernel *new_kernels(const ort_api *api, int32_t n) {
    tc_kernel *out = calloc((size_t)n + 1, sizeof *out);
    for (int32_t i = 0; out && i <= n; i++) {
        out[i].api = api;
        out[i].fd = -1;
    }
    return out;
}

/* Kernel v of node kernel k's: k's entry, the key `<k's key>-<tag><n>`, then its load
 * (as the kernel for `rows` rows of the rows node `head`, or with NULL and 0). */
static ort_status *load_derived(tc_kernel *v, const tc_kernel *k, char tag, int64_t n,
                                const tc_op *op, const ort_kernel_info *info,
                                const tc_kernel *head, int64_t rows) {
    v->entry = strdup(k->entry);
    v->key = malloc(strlen(k->key) + 24);
    if (!v->entry || !v->key) return error(k->api, ORT_FAIL, "tc_graph: out of memory");
    sprintf(v->key, "%s-%c%" PRId64, k->key, tag, n);
    return load_kernel(v, op, info, head, rows);
}

/* A rows node's kernels, one per size, each under the key the node's key gives it. */
static ort_status *load_variants(tc_kernel *h, const tc_op *op, const ort_kernel_info *info) {
    h->variants = new_kernels(h->api, h->num_rows);
    if (!h->variants) return error(h->api, ORT_FAIL, "tc_graph: out of memory");
    ort_status *st = NULL;
    for (int32_t i = 0; i < h->num_rows && !st; i++)
        st = load_derived(&h->variants[i], h, 'r', h->row_sizes[i], op, info, h,
                          h->row_sizes[i]);
    return st;
}

/* The node's every_size attribute: absent (fixed shapes), or [1]. */
static ort_status *read_every_size(tc_kernel *k, const ort_kernel_info *info) {
    size_t n = 0;
    int64_t *flag = ints_attribute(k->api, info, "every_size", &n);
    if (!flag) return NULL;
    int ok = n == 1 && flag[0] == 1;
    free(flag);
    if (!ok)
        return error(k->api, ORT_INVALID_ARGUMENT,
                     "tc_graph kernel '%s': the node's every_size attribute must be [1]; "
                     "re-run tc_graph.optimize on the original model",
                     k->entry);
    k->every_size = 1;
    size_t n_at = 0;
    k->special_sizes = ints_attribute(k->api, info, "every_size_at", &n_at);
    k->num_special = (int32_t)(n_at < 4096 ? n_at : 4096); /* values, until load_specials */
    size_t n_from = 0;
    k->from_sizes = ints_attribute(k->api, info, "every_size_from", &n_from);
    k->num_others = n_from <= 4096 ? (int32_t)n_from : -1; /* values, until load_others */
    return NULL;
}

/* A node for every size's specialised kernels, each under `<kernel_key>-s<i>`: every_size_at
 * holds tc_num_sizes values for each. */
static ort_status *load_specials(tc_kernel *k, const tc_op *op, const ort_kernel_info *info) {
    if (!k->special_sizes) return NULL;
    int32_t values = k->num_special;
    if (values && (k->num_sizes < 1 || values % k->num_sizes != 0))
        return error(k->api, ORT_INVALID_ARGUMENT,
                     "tc_graph kernel '%s': the node's every_size_at attribute is not a whole "
                     "number of size lists; re-run tc_graph.optimize on the original model",
                     k->entry);
    k->num_special = values ? values / k->num_sizes : 0;
    if (k->num_special > TC_MAX_SPECIAL)
        return error(k->api, ORT_INVALID_ARGUMENT,
                     "tc_graph kernel '%s': the node lists %d specialised kernels, at most %d; "
                     "re-run tc_graph.optimize on the original model",
                     k->entry, (int)k->num_special, TC_MAX_SPECIAL);
    k->specials = new_kernels(k->api, k->num_special);
    if (!k->specials) return error(k->api, ORT_FAIL, "tc_graph: out of memory");
    ort_status *st = NULL;
    for (int32_t i = 0; i < k->num_special && !st; i++) {
        k->specials[i].special = 1;
        st = load_derived(&k->specials[i], k, 's', i, op, info, NULL, 0);
    }
    return st;
}

/* A node for every size's other kernels for every size, each under `<kernel_key>-p<i>`:
 * every_size_from holds tc_num_sizes values for the node's own kernel, then for each. */
static ort_status *load_others(tc_kernel *k, const tc_op *op, const ort_kernel_info *info) {
    if (!k->from_sizes) return NULL;
    int32_t values = k->num_others;
    if (values < 0 || k->num_sizes < 1 || values % k->num_sizes != 0 ||
        values / k->num_sizes > TC_MAX_SPECIAL)
        return error(k->api, ORT_INVALID_ARGUMENT,
                     "tc_graph kernel '%s': the node's every_size_from attribute is not a "
                     "whole number of lists of its %d sizes, at most %d; re-run "
                     "tc_graph.optimize on the original model",
                     k->entry, (int)k->num_sizes, TC_MAX_SPECIAL);
    k->num_others = values ? values / k->num_sizes - 1 : 0;
    k->others = new_kernels(k->api, k->num_others);
    if (!k->others) return error(k->api, ORT_FAIL, "tc_graph: out of memory");
    for (int32_t i = 0; i < k->num_others; i++) {
        tc_kernel *v = &k->others[i];
        v->every_size = 1;
        ort_status *st = load_derived(v, k, 'p', i, op, info, NULL, 0);
        if (st) return st;
        if (v->num_sizes != k->num_sizes)
            return error(k->api, ORT_INVALID_ARGUMENT,
                         "tc_graph kernel '%s' (key %s) has %d sizes, the node's kernel %d; "
                         "run tc_graph.prepare(model) again, or re-run tc_graph.optimize",
                         k->entry, v->key, (int)v->num_sizes, (int)k->num_sizes);
    }
    return NULL;
}

/* What creating a kernel checks, in order: the key's form, the key against the node's
 * attributes, then load_kernel's checks, for each of a rows node's kernels. The first
 * failure is returned. */
/* A value's element type and dimensions onnxruntime gives (dims is left unread past
 * TC_MAX_RANK: rank says so). */
static ort_status *value_shape(const ort_api *api, const ort_value *value, int *dtype,
                               size_t *rank, int64_t *dims) {
    ort_type_shape *info = NULL;
    ort_status *st = ORT_CALL(api, SLOT_GET_TENSOR_TYPE_AND_SHAPE, type_and_shape_fn)(value, &info);
    if (st) return st;
    st = ORT_CALL(api, SLOT_GET_TENSOR_ELEMENT_TYPE, element_type_fn)(info, dtype);
    if (!st) st = ORT_CALL(api, SLOT_GET_DIMENSIONS_COUNT, dims_count_fn)(info, rank);
    if (!st && *rank <= TC_MAX_RANK)
        st = ORT_CALL(api, SLOT_GET_DIMENSIONS, dims_fn)(info, dims, *rank);
    ORT_CALL(api, SLOT_RELEASE_TENSOR_TYPE_AND_SHAPE, release_type_shape_fn)(info);
    return st;
}

/* Whether constant input i (value) has the element type and dimensions kernel k reads (a
 * kernel for every size takes any dimensions: tc_shapes checks them), its dimensions then
 * in dims. */
static int constant_fits(const tc_kernel *k, const ort_value *value, int32_t i, int64_t *dims) {
    int dtype = 0;
    size_t rank = 0;
    int64_t got[TC_MAX_RANK];
    ort_status *st = value_shape(k->api, value, &dtype, &rank, got);
    if (st) {
        release_status(k->api, st);
        return 0;
    }
    int same = dtype == k->dtypes[i] && rank == (size_t)k->ranks[i] && rank <= TC_MAX_RANK;
    if (same && k->abi == TC_ABI_VERSION)
        same = !memcmp(got, k->dims + k->dims_offset[i], rank * sizeof *got);
    if (same) memcpy(dims, got, rank * sizeof *got);
    return same;
}

/* The node's constant inputs (onnxruntime's constant initializers), checked now so that a
 * run reads only the others: each input read costs a run 6 onnxruntime calls, and a
 * BERT-style layer has 17 weights. One that does not fit is left to the run's check. */
static ort_status *read_constants(tc_kernel *h, const ort_kernel_info *info) {
    tc_kernel *k = h->num_rows ? &h->variants[0] : h;
    h->constant = calloc((size_t)k->num_inputs + 1, sizeof *h->constant);
    h->constant_dims = calloc((size_t)k->dims_offset[k->num_inputs] + 1, sizeof *h->constant_dims);
    h->own_constant = 1; /* release_kernel frees both, either of them NULL */
    if (!h->constant || !h->constant_dims) return error(h->api, ORT_FAIL, "tc_graph: out of memory");
    for (int32_t i = 0; i < k->num_inputs; i++) {
        const ort_value *value = NULL;
        int is_constant = 0;
        ort_status *st = ORT_CALL(h->api, SLOT_KERNEL_INFO_GET_CONSTANT_INPUT, constant_input_fn)(
            info, (size_t)i, &is_constant, &value);
        if (st) return st;
        if (!is_constant || !value || (h->num_rows && h->row_flags[i])) continue;
        if (!constant_fits(k, value, i, h->constant_dims + k->dims_offset[i])) continue;
        st = ORT_CALL(h->api, SLOT_GET_TENSOR_MUTABLE_DATA, mutable_data_fn)((ort_value *)value,
                                                                           &h->constant[i]);
        if (st) return st;
    }
    for (int32_t v = 0; v < h->num_rows; v++) {
        h->variants[v].constant = h->constant;
        h->variants[v].constant_dims = h->constant_dims;
    }
    return NULL;
}

static ort_status *open_kernel(tc_kernel *k, const tc_op *op, const ort_kernel_info *info) {
    const ort_api *api = k->api;
    ort_status *st = NULL;
    k->key = string_attribute(api, info, "kernel_key", NULL, &st);
    if (!st) k->entry = string_attribute(api, info, "entry", NULL, &st);
    if (st) return st;
    if (!valid_key(k->key))
        return error(api, ORT_INVALID_ARGUMENT,
                     "tc_graph kernel '%s': invalid kernel_key attribute '%.200s'", k->entry,
                     k->key);
    st = read_every_size(k, info);
    if (!st) st = read_rows(k, info);
    if (!st && k->num_rows && k->every_size)
        st = error(api, ORT_INVALID_ARGUMENT,
                   "tc_graph kernel '%s': a node has row_sizes or every_size, not both; re-run "
                   "tc_graph.optimize on the original model",
                   k->entry);
    if (!st) st = check_key(k, info);
    if (st) return st;
    if (k->num_rows) {
        st = load_variants(k, op, info);
    } else {
        st = load_kernel(k, op, info, NULL, 0);
        if (!st) st = load_specials(k, op, info);
        if (!st) st = load_others(k, op, info);
    }
    return st ? st : read_constants(k, info);
}

static void release_kernel(tc_kernel *k) {
    if (k->handle) dlclose(k->handle);
    if (k->fd >= 0) close(k->fd); /* after dlclose: see dlopen_bytes */
    free(k->key);
    free(k->entry);
    free(k->dims_offset);
    free(k->tensor_bytes);
    for (int32_t i = 0; k->variants && i < k->num_rows; i++) release_kernel(&k->variants[i]);
    free(k->variants);
    for (int32_t i = 0; k->specials && i < k->num_special; i++) release_kernel(&k->specials[i]);
    free(k->specials);
    free(k->special_sizes);
    for (int32_t i = 0; k->others && i < k->num_others; i++) release_kernel(&k->others[i]);
    free(k->others);
    free(k->from_sizes);
    free(k->row_sizes);
    free(k->row_flags);
    if (k->own_constant) {
        free(k->constant);
        free(k->constant_dims);
    }
}

static void destroy_kernel(void *p) {
    if (!p) return;
    release_kernel(p);
    free(p);
}

static ort_status *create_kernel_v2(const tc_op *op, const ort_api *api,
                                    const ort_kernel_info *info, void **out) {
    *out = NULL;
    tc_kernel *k = calloc(1, sizeof *k);
    if (!k) return error(api, ORT_FAIL, "tc_graph: out of memory");
    k->api = api;
    k->fd = -1;
    ort_status *st = open_kernel(k, op, info);
    if (st) {
        destroy_kernel(k);
        return st;
    }
    *out = k;
    return NULL;
}

/* ------------------------------------------------------------------------------ compute */

/* Iterations [lo, hi) of phase p: a kernel for every size passes its run's sizes. */
static int call_phase(const tc_kernel *k, int32_t p, void *const *args, void *const *temps,
                      int64_t lo, int64_t hi, int64_t *value) {
    if (k->abi == TC_SIZES_ABI_VERSION)
        return k->sized_phase(p, args, temps, k->sizes, lo, hi, value);
    return k->phase(p, args, temps, lo, hi, value);
}

/* One chunk of a parallel phase: a contiguous range of its iterations. */
static void run_chunk(void *usr, size_t i) {
    tc_run *run = usr;
    if (__atomic_load_n(&run->code, __ATOMIC_RELAXED) != 0) return; /* already failed */
    int64_t base = run->trips / run->chunks, extra = run->trips % run->chunks;
    int64_t c = (int64_t)i;
    int64_t lo = c * base + (c < extra ? c : extra);
    int64_t hi = lo + base + (c < extra ? 1 : 0);
    int64_t value = 0;
    int code = call_phase(run->kernel, run->phase, run->args, run->temps, lo, hi, &value);
    if (code != 0) {
        int expected = 0;
        if (__atomic_compare_exchange_n(&run->code, &expected, code, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED))
            __atomic_store_n(&run->value, value, __ATOMIC_RELEASE);
    }
}

/* The ranges a parallel phase is split into at most: four per online CPU. onnxruntime
 * calls the phase once per range (its pool hands them out one at a time), and each call
 * costs the phase's setup: a BERT-style layer for every size at 1 x 77 tokens, its rows
 * and heads folded into 77 and 154 iterations, ran 20% slower on one thread cut into up
 * to TC_MAX_CHUNKS ranges. */
static int64_t chunk_cap(void) {
    static int64_t cap; /* 0 until first asked; every thread computes the same value */
    int64_t c = __atomic_load_n(&cap, __ATOMIC_RELAXED);
    if (!c) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        c = n < 1 ? 4 : n >= TC_MAX_CHUNKS / 4 ? TC_MAX_CHUNKS : 4 * (int64_t)n;
        __atomic_store_n(&cap, c, __ATOMIC_RELAXED);
    }
    return c;
}

static ort_status *phase_error(const tc_kernel *k, int code, int64_t value) {
    if (code == -1)
        return error(k->api, ORT_FAIL, "tc_graph kernel '%s': out of memory", k->entry);
    if (code < 0)
        return error(k->api, ORT_RUNTIME_EXCEPTION,
                     "tc_graph kernel '%s' (key %s): internal error %d in a phase; this is a "
                     "tc_graph bug, please report it", k->entry, k->key, code);
    /* The code indexes the table only where the kernel says the table reaches. */
    const char *what = code <= k->num_checks ? k->check_text[code - 1] : NULL;
    return error(k->api, ORT_INVALID_ARGUMENT,
                 "tc_graph kernel '%s': index %" PRId64 " out of range: %s", k->entry, value,
                 what ? what : "an indirect subscript");
}

/* The bytes of a run's tensors and temporaries. A run that touches at most TC_ALONE_BYTES
 * runs on the calling thread: waking onnxruntime's pool cost more than such a run's work
 * (a Gemm of 8 x 64 by 128 x 64 with its Relu: 13.4 us a run on the pool, 7.0 alone, and
 * 7.6 in onnxruntime; an Exp and Sigmoid of 64 x 64: 10.8 and 8.2 us; Zen 4, 2 threads). */
#define TC_ALONE_BYTES ((size_t)64 << 10)

static size_t run_bytes(const tc_kernel *k) {
    size_t total = 0;
    for (int32_t t = 0; t < k->num_tensors; t++) total += k->tensor_bytes[t];
    for (int32_t t = 0; t < k->num_temps; t++)
        if (k->temp_bytes[t] > 0) total += (size_t)k->temp_bytes[t];
    return total;
}

/* Run every phase in order (a small run's on this thread, each phase in one call, as is a
 * phase of a kernel for every size with fewer iterations than it says are worth the
 * pool); the first failure ends the run. */
static ort_status *run_phases(const tc_kernel *k, ort_kernel_context *ctx, void *const *args,
                              void *const *temps) {
    parallel_for_fn parallel_for =
        ORT_CALL(k->api, SLOT_KERNEL_CONTEXT_PARALLEL_FOR, parallel_for_fn);
    const int alone = run_bytes(k) <= TC_ALONE_BYTES;
    for (int32_t p = 0; p < k->num_phases; p++) {
        int64_t trips = k->phase_trips[p];
        if (trips <= 0) continue;
        if (trips == 1 || alone || (k->phase_least && trips < k->phase_least[p])) {
            int64_t value = 0;
            int code = call_phase(k, p, args, temps, 0, trips, &value);
            if (code) return phase_error(k, code, value);
            continue;
        }
        tc_run run = {
            .kernel = k,
            .phase = p,
            .args = args,
            .temps = temps,
            .trips = trips,
            .chunks = trips < chunk_cap() ? trips : chunk_cap(),
        };
        ort_status *st = parallel_for(ctx, run_chunk, (size_t)run.chunks, 0, &run);
        if (st) return st;
        int code = __atomic_load_n(&run.code, __ATOMIC_ACQUIRE);
        if (code) return phase_error(k, code, __atomic_load_n(&run.value, __ATOMIC_ACQUIRE));
    }
    return NULL;
}

/* The element type and dimensions onnxruntime gives a value, and whether they are tensor
 * t's in the kernel, with the leading dimensions `lead` where that is not NULL (dims is
 * left unread past TC_MAX_RANK: rank says so). */
static ort_status *value_matches(const tc_kernel *k, const ort_value *value, int32_t t,
                                 const tc_lead *lead, int *dtype, size_t *rank, int64_t *dims,
                                 int *same) {
    ort_status *st = value_shape(k->api, value, dtype, rank, dims);
    if (st) return st;
    const int64_t *want = k->dims + k->dims_offset[t];
    *same = *dtype == k->dtypes[t] && *rank == (size_t)k->ranks[t];
    size_t n = lead ? (size_t)lead->n : 0;
    for (size_t d = 0; *same && d < *rank; d++) *same = dims[d] == (d < n ? lead->dims[d] : want[d]);
    return NULL;
}

/* Input i of the run; an error where onnxruntime gives none. */
static ort_status *input_value(const tc_kernel *k, const ort_kernel_context *ctx, int32_t i,
                               const ort_value **value) {
    ort_status *st = ORT_CALL(k->api, SLOT_KERNEL_CONTEXT_GET_INPUT, context_input_fn)(
        ctx, (size_t)i, value);
    if (st) return st;
    if (!*value)
        return error(k->api, ORT_INVALID_ARGUMENT, "tc_graph kernel '%s': input %d is missing",
                     k->entry, (int)i);
    return NULL;
}

/* Input i's element type and dimensions against the kernel's (with the leading dimensions
 * `lead` where that is not NULL); its data pointer in *data. */
static ort_status *bind_input(const tc_kernel *k, const ort_kernel_context *ctx, int32_t i,
                              const tc_lead *lead, void **data) {
    const ort_api *api = k->api;
    if (k->constant && k->constant[i] && !lead) {
        *data = k->constant[i];
        return NULL;
    }
    const ort_value *value = NULL;
    ort_status *st = input_value(k, ctx, i, &value);
    if (st) return st;
    int dtype = 0, same = 0;
    size_t rank = 0;
    int64_t dims[TC_MAX_RANK];
    st = value_matches(k, value, i, lead, &dtype, &rank, dims, &same);
    if (st) return st;
    if (!same) {
        int64_t want[TC_MAX_RANK];
        size_t want_rank = (size_t)k->ranks[i];
        memcpy(want, k->dims + k->dims_offset[i], want_rank * sizeof *want);
        for (int32_t d = 0; lead && d < lead->n && d < (int32_t)want_rank; d++)
            want[d] = lead->dims[d];
        char got_shape[256], want_shape[256];
        if (rank <= TC_MAX_RANK)
            format_shape(got_shape, sizeof got_shape, dims, rank);
        else
            snprintf(got_shape, sizeof got_shape, "(rank %zu)", rank);
        format_shape(want_shape, sizeof want_shape, want, want_rank);
        return error(api, ORT_INVALID_ARGUMENT,
                     "tc_graph kernel '%s' (key %s): input %d must be %s of shape %s, got %s of "
                     "shape %s (%s)",
                     k->entry, k->key, (int)i, dtype_name(k->dtypes[i]), want_shape,
                     dtype_name(dtype), got_shape,
                     lead ? "its leading dimensions are the rows of the kernel's first input "
                            "that has them"
                          : "the kernel is compiled for these shapes");
    }
    return ORT_CALL(api, SLOT_GET_TENSOR_MUTABLE_DATA, mutable_data_fn)((ort_value *)value, data);
}

/* Output o, allocated by onnxruntime with the kernel's dimensions, and its element type
 * checked against the kernel's before anything is written: the graph may declare another
 * type (a float64 kernel writing into a uint8 tensor would overflow it). */
static ort_status *bind_output(const tc_kernel *k, ort_kernel_context *ctx, int32_t o,
                               const tc_lead *lead, void **data) {
    const ort_api *api = k->api;
    int32_t t = k->num_inputs + o;
    ort_value *value = NULL;
    int64_t shape[TC_MAX_RANK];
    memcpy(shape, k->dims + k->dims_offset[t], (size_t)k->ranks[t] * sizeof *shape);
    for (int32_t d = 0; lead && d < lead->n; d++) shape[d] = lead->dims[d];
    size_t bytes = lead ? k->tensor_bytes[t] / (size_t)k->dims[k->dims_offset[t]] *
                              (size_t)lead->rows
                        : k->tensor_bytes[t];
    ort_status *st = ORT_CALL(api, SLOT_KERNEL_CONTEXT_GET_OUTPUT, context_output_fn)(
        ctx, (size_t)o, shape, (size_t)k->ranks[t], &value);
    if (st) return st;
    if (!value)
        return error(api, ORT_FAIL, "tc_graph kernel '%s': output %d is missing", k->entry,
                     (int)o);
    int dtype = 0, same = 0;
    size_t rank = 0;
    int64_t dims[TC_MAX_RANK];
    st = value_matches(k, value, t, lead, &dtype, &rank, dims, &same);
    if (st) return st;
    if (!same)
        return error(api, ORT_INVALID_ARGUMENT,
                     "tc_graph kernel '%s' (key %s): output %d is %s, the graph makes it %s: "
                     "the model declares a type the kernel does not compute; re-run "
                     "tc_graph.optimize on the original model",
                     k->entry, k->key, (int)o, dtype_name(k->dtypes[t]), dtype_name(dtype));
    st = ORT_CALL(api, SLOT_GET_TENSOR_MUTABLE_DATA, mutable_data_fn)(value, data);
    if (st) return st;
    if (bytes && !*data)
        return error(api, ORT_FAIL, "tc_graph kernel '%s': output %d has no buffer", k->entry,
                     (int)o);
    if (k->output_zero[o] && bytes) memset(*data, 0, bytes);
    return NULL;
}

/* Temporaries of at least this many bytes come from onnxruntime's CPU allocator, whose
 * arena keeps a freed block for the next run. From malloc, one over glibc's mmap threshold
 * (128 KiB at first, then as large as the largest freed, up to 32 MiB) could be mapped
 * afresh on every run and each of its pages faulted in again: a BERT layer for every size
 * at 15 x 137 tokens ran 4x slower, most of its time in page faults. Smaller ones stay
 * with malloc, which reuses them without a fault and costs a small run less (a BERT
 * layer at one token ran 20% slower with all of its temporaries from the arena). */
#define TC_ARENA_BYTES ((size_t)128 << 10)

static size_t temp_size(const tc_kernel *k, int32_t t) {
    size_t bytes = k->temp_bytes[t] > 0 ? (size_t)k->temp_bytes[t] : 1;
    return (bytes + 63) & ~(size_t)63;
}

static ort_status *open_allocator(const ort_api *api, const ort_kernel_context *ctx,
                                  ort_allocator **out) {
    ort_memory_info *info = NULL;
    ort_status *st = ORT_CALL(api, SLOT_CREATE_CPU_MEMORY_INFO, cpu_memory_info_fn)(
        ORT_ARENA_ALLOCATOR, ORT_MEM_TYPE_DEFAULT, &info);
    if (!st)
        st = ORT_CALL(api, SLOT_KERNEL_CONTEXT_GET_ALLOCATOR, context_allocator_fn)(ctx, info, out);
    if (info) ORT_CALL(api, SLOT_RELEASE_MEMORY_INFO, release_memory_info_fn)(info);
    return st;
}

/* `bytes` from alloc, aligned to 64 bytes: the block's start is kept in the word below
 * (free_temps), as the allocator promises no alignment. NULL when it has none to give. */
static void *arena_alloc(const ort_api *api, ort_allocator *alloc, size_t bytes) {
    void *block = NULL;
    ort_status *st = ORT_CALL(api, SLOT_ALLOCATOR_ALLOC, allocator_alloc_fn)(
        alloc, bytes + 64 + sizeof(void *), &block);
    int failed = st != NULL || block == NULL;
    release_status(api, st);
    if (failed) return NULL;
    uintptr_t at = ((uintptr_t)block + sizeof(void *) + 63) & ~(uintptr_t)63;
    ((void **)at)[-1] = block;
    return (void *)at;
}

/* Where one run's temporaries came from (free_temps gives them back): the arena's
 * allocator (NULL until one is needed), and the block the smaller ones share. */
typedef struct {
    ort_allocator *alloc;
    void *block;
    int block_in_arena;
} tc_temps;

/* The bytes of k's temporaries under TC_ARENA_BYTES, which share one block. */
static size_t shared_bytes(const tc_kernel *k) {
    size_t total = 0;
    for (int32_t t = 0; t < k->num_temps; t++)
        if (temp_size(k, t) < TC_ARENA_BYTES) total += temp_size(k, t);
    return total;
}

/* `bytes` for a run: from malloc under TC_ARENA_BYTES, else from the arena (its allocator
 * opened in `from` the first time). NULL with *st NULL when there is no memory. */
static void *run_alloc(const tc_kernel *k, const ort_kernel_context *ctx, size_t bytes,
                       tc_temps *from, int *in_arena, ort_status **st) {
    void *p = NULL;
    *in_arena = bytes >= TC_ARENA_BYTES;
    *st = NULL;
    if (!*in_arena) return posix_memalign(&p, 64, bytes) == 0 ? p : NULL;
    if (!from->alloc) *st = open_allocator(k->api, ctx, &from->alloc);
    return *st ? NULL : arena_alloc(k->api, from->alloc, bytes);
}

/* k's temporaries for one run, in temps (NULL on entry): each of TC_ARENA_BYTES or more
 * on its own, the others carved from one block (one allocation a run, not one each: 22
 * temporaries of a BERT-style layer took 1.4 us a run in posix_memalign and free, Zen 4).
 * free_temps gives all of them back, also after a failure. */
static ort_status *alloc_temps(const tc_kernel *k, const ort_kernel_context *ctx, void **temps,
                               tc_temps *from) {
    *from = (tc_temps){0};
    ort_status *st = NULL;
    size_t shared = shared_bytes(k);
    char *at = NULL;
    if (shared) {
        at = from->block = run_alloc(k, ctx, shared, from, &from->block_in_arena, &st);
        if (st) return st;
    }
    for (int32_t t = 0; t < k->num_temps; t++) {
        size_t bytes = temp_size(k, t);
        int in_arena = 0;
        if (bytes < TC_ARENA_BYTES) {
            temps[t] = at;
            at = at ? at + bytes : NULL;
        } else {
            temps[t] = run_alloc(k, ctx, bytes, from, &in_arena, &st);
            if (st) return st;
        }
        if (!temps[t])
            return error(k->api, ORT_FAIL,
                         "tc_graph kernel '%s': out of memory allocating a temporary of %zu "
                         "bytes",
                         k->entry, bytes);
        if (k->temp_zero[t]) memset(temps[t], 0, bytes);
    }
    return NULL;
}

static void arena_free(const tc_kernel *k, ort_allocator *alloc, void *p) {
    release_status(k->api, ORT_CALL(k->api, SLOT_ALLOCATOR_FREE, allocator_free_fn)(
                               alloc, ((void **)p)[-1]));
}

static void free_temps(const tc_kernel *k, tc_temps *from, void **temps) {
    for (int32_t t = 0; t < k->num_temps; t++) {
        if (temps[t] && temp_size(k, t) >= TC_ARENA_BYTES) arena_free(k, from->alloc, temps[t]);
        temps[t] = NULL;
    }
    if (from->block && from->block_in_arena)
        arena_free(k, from->alloc, from->block);
    else
        free(from->block);
    if (from->alloc) ORT_CALL(k->api, SLOT_RELEASE_ALLOCATOR, release_allocator_fn)(from->alloc);
    *from = (tc_temps){0};
}

/* One run of k on these tensors, with temporaries of its own (in temps). */
static ort_status *run_once(const tc_kernel *k, ort_kernel_context *ctx, void *const *args,
                            void **temps) {
    tc_temps from;
    ort_status *st = alloc_temps(k, ctx, temps, &from);
    if (!st) st = run_phases(k, ctx, args, temps);
    free_temps(k, &from, temps);
    return st;
}

/* The leading dimensions of a rows node's run: those of its first input that has them
 * (lead->n stays 0 for a fixed-shape node, or where that input is missing or too small:
 * binding it reports that). */
static ort_status *run_lead(const tc_kernel *h, const ort_kernel_context *ctx, tc_lead *lead) {
    lead->n = 0;
    lead->rows = 0;
    if (!h->num_rows) return NULL;
    const tc_kernel *k = &h->variants[0];
    int32_t i = 0;
    while (!h->row_flags[i]) i++; /* read_rows made sure an input has them */
    const ort_value *value = NULL;
    ort_status *st = ORT_CALL(k->api, SLOT_KERNEL_CONTEXT_GET_INPUT, context_input_fn)(
        ctx, (size_t)i, &value);
    if (st || !value) return st;
    int dtype = 0, same = 0;
    size_t rank = 0;
    int64_t dims[TC_MAX_RANK];
    st = value_matches(k, value, i, NULL, &dtype, &rank, dims, &same);
    int32_t n = (int32_t)h->row_flags[i];
    if (st || rank < (size_t)n || rank > TC_MAX_RANK) return st;
    lead->rows = 1;
    for (int32_t d = 0; d < n; d++) {
        lead->dims[d] = dims[d];
        if (dims[d] < 0 || (dims[d] && lead->rows > INT64_MAX / dims[d]))
            return error(k->api, ORT_INVALID_ARGUMENT,
                         "tc_graph kernel '%s': input %d has too many rows", k->entry, (int)i);
        lead->rows *= dims[d];
    }
    lead->n = n;
    return NULL;
}

/* Point moved at the part of each tensor that a chunk starting at row `at` reads. */
static void move_to(const tc_kernel *h, void *const *args, void **moved, int64_t at) {
    const tc_kernel *k = &h->variants[0];
    for (int32_t t = 0; t < k->num_tensors; t++) {
        size_t row = h->row_flags[t] ? k->tensor_bytes[t] / (size_t)h->row_sizes[0] : 0;
        moved[t] = (char *)args[t] + (size_t)at * row;
    }
}

/* Copies of one size that the pool's threads share: each runs whole chunks, every phase
 * of a chunk in one call (no pool inside a pool). Lives on the run's stack. */
typedef struct {
    const tc_kernel *head, *kernel;
    const ort_kernel_context *ctx;
    void *const *args;
    int64_t at, size;
    int code;
    int64_t value;
} tc_copies;

static void run_copy(void *usr, size_t i) {
    tc_copies *c = usr;
    if (__atomic_load_n(&c->code, __ATOMIC_RELAXED) != 0) return;
    const tc_kernel *v = c->kernel;
    void **own = calloc((size_t)v->num_tensors + (size_t)v->num_temps + 1, sizeof *own);
    int code = -1;
    int64_t value = 0;
    if (own) {
        void **temps = own + v->num_tensors;
        move_to(c->head, c->args, own, c->at + (int64_t)i * c->size);
        tc_temps from;
        ort_status *st = alloc_temps(v, c->ctx, temps, &from);
        code = st ? -1 : 0;
        if (st) release_status(v->api, st);
        for (int32_t p = 0; !code && p < v->num_phases; p++)
            if (v->phase_trips[p] > 0) code = v->phase(p, own, temps, 0, v->phase_trips[p], &value);
        free_temps(v, &from, temps);
        free(own);
    }
    int expected = 0;
    if (code && __atomic_compare_exchange_n(&c->code, &expected, code, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_RELAXED))
        __atomic_store_n(&c->value, value, __ATOMIC_RELEASE);
}

/* Whether a chunk of kernel v may run again over rows another chunk ran: it writes every
 * element of its outputs from its inputs alone (none starts from zeros it adds to). */
static int reruns(const tc_kernel *v) {
    for (int32_t o = 0; o < v->num_outputs; o++)
        if (v->output_zero[o]) return 0;
    return 1;
}

/* Run a rows node over `rows` rows: chunks of the largest size that fits what is left,
 * then of the next, ... Several chunks of one size run side by side on the pool, each on
 * one thread (13 rows with kernels for 4 and 1: three chunks of 4 at once, then one of 1;
 * 64 rows by a kernel for 8: eight, not eight in turn each spread over the pool), or in
 * turn on this thread where together they are a small run; a single chunk runs as a
 * fixed-shape node does. Where the rows left past a size's chunks are at least half a
 * chunk, one more chunk of that size ends at the last row instead, over some rows again
 * (their values are the same): 15 rows with kernels for 8, 4 and 1 run 0-7 and 7-14, not
 * 8, 4 and three of 1 (a DLRM export lost to onnxruntime at 15 rows in five runs). */
static ort_status *run_chunks(const tc_kernel *h, ort_kernel_context *ctx, void *const *args,
                              void **moved, void **temps, int64_t rows) {
    parallel_for_fn parallel_for =
        ORT_CALL(h->api, SLOT_KERNEL_CONTEXT_PARALLEL_FOR, parallel_for_fn);
    ort_status *st = NULL;
    int64_t at = 0;
    for (int32_t i = 0; i < h->num_rows && !st && at < rows; i++) {
        const tc_kernel *v = &h->variants[i];
        int64_t size = h->row_sizes[i], count = (rows - at) / size;
        int64_t left = rows - at - count * size;
        int again = count > 0 && 2 * left >= size && reruns(v);
        if (count == 1) {
            move_to(h, args, moved, at);
            st = run_once(v, ctx, moved, temps);
        } else if (count > 1) {
            tc_copies c = {.head = h, .kernel = v, .ctx = ctx, .args = args, .at = at,
                           .size = size};
            if ((size_t)count * run_bytes(v) <= TC_ALONE_BYTES)
                for (int64_t j = 0; j < count; j++) run_copy(&c, (size_t)j);
            else
                st = parallel_for(ctx, run_copy, (size_t)count, 0, &c);
            int code = __atomic_load_n(&c.code, __ATOMIC_ACQUIRE);
            if (!st && code) st = phase_error(v, code, __atomic_load_n(&c.value, __ATOMIC_ACQUIRE));
        }
        at += count * size;
        if (again && !st) {
            move_to(h, args, moved, rows - size);
            st = run_once(v, ctx, moved, temps);
            at = rows;
        }
    }
    return st;
}

/* Input i's dimensions, into dims, once its element type and rank are the kernel's (a
 * kernel for every size: tc_shapes checks the dimensions), and its data pointer. */
static ort_status *input_dims(const tc_kernel *k, const ort_kernel_context *ctx, int32_t i,
                              int64_t *dims, void **data) {
    const ort_api *api = k->api;
    if (k->constant && k->constant[i]) {
        memcpy(dims, k->constant_dims + k->dims_offset[i], (size_t)k->ranks[i] * sizeof *dims);
        *data = k->constant[i];
        return NULL;
    }
    const ort_value *value = NULL;
    ort_status *st = input_value(k, ctx, i, &value);
    if (st) return st;
    int dtype = 0;
    size_t rank = 0;
    int64_t got[TC_MAX_RANK];
    st = value_shape(api, value, &dtype, &rank, got);
    if (st) return st;
    if (dtype == k->dtypes[i] && rank == (size_t)k->ranks[i]) {
        memcpy(dims, got, rank * sizeof *dims); /* a kernel's rank is at most TC_MAX_RANK */
        return ORT_CALL(api, SLOT_GET_TENSOR_MUTABLE_DATA, mutable_data_fn)((ort_value *)value,
                                                                          data);
    }
    return error(api, ORT_INVALID_ARGUMENT,
                 "tc_graph kernel '%s' (key %s): input %d must be %s of rank %d, got %s of "
                 "rank %zu",
                 k->entry, k->key, (int)i, dtype_name(k->dtypes[i]), (int)k->ranks[i],
                 dtype_name(dtype), rank);
}

/* Each tensor's bytes at these dimensions (a size_t each, or an error). */
static ort_status *tensor_sizes(const tc_kernel *k, const int64_t *dims, size_t *bytes) {
    for (int32_t t = 0; t < k->num_tensors; t++) {
        size_t size = element_size(k->dtypes[t]);
        for (int64_t d = k->dims_offset[t]; d < k->dims_offset[t + 1]; d++) {
            if (dims[d] < 0 || (dims[d] > 0 && size > SIZE_MAX / (size_t)dims[d]))
                return error(k->api, ORT_INVALID_ARGUMENT,
                             "tc_graph kernel '%s' (key %s): tensor %d is too large", k->entry,
                             k->key, (int)t);
            size *= (size_t)dims[d];
        }
        bytes[t] = size;
    }
    return NULL;
}

static ort_status *run_node(const tc_kernel *h, ort_kernel_context *ctx);
static ort_status *run_sized(const tc_kernel *k, ort_kernel_context *ctx,
                             const int64_t *in_dims, void *const *in);

/* The node's kernel specialised to exactly these sizes, or NULL. */
static const tc_kernel *special_at(const tc_kernel *k, const int64_t *sizes) {
    for (int32_t i = 0; i < k->num_special; i++)
        if (!memcmp(k->special_sizes + (size_t)i * (size_t)k->num_sizes, sizes,
                    (size_t)k->num_sizes * sizeof *sizes))
            return &k->specials[i];
    return NULL;
}

/* How far apart two lists of n sizes are: the product of each pair's ratio, the larger
 * over the smaller (a size below 1 counts as 1), as sizes scale. */
static double size_ratio(const int64_t *a, const int64_t *b, int32_t n) {
    double ratio = 1.0;
    for (int32_t i = 0; i < n; i++) {
        double x = (double)(a[i] > 1 ? a[i] : 1), y = (double)(b[i] > 1 ? b[i] : 1);
        ratio *= x > y ? x / y : y / x;
    }
    return ratio;
}

/* The node's other kernel for every size whose choices were made nearest these sizes,
 * or NULL where its own kernel's were (the first of every_size_from; ties go to it). */
static const tc_kernel *nearest_other(const tc_kernel *k, const int64_t *sizes) {
    const tc_kernel *out = NULL;
    double best = k->num_others ? size_ratio(k->from_sizes, sizes, k->num_sizes) : 0.0;
    for (int32_t i = 0; i < k->num_others; i++) {
        double r = size_ratio(k->from_sizes + (size_t)(i + 1) * (size_t)k->num_sizes, sizes,
                              k->num_sizes);
        if (r < best) {
            best = r;
            out = &k->others[i];
        }
    }
    return out;
}

/* A run of a kernel for every size: the input dimensions, read once (see run_sized). */
static ort_status *run_every_size(const tc_kernel *k, ort_kernel_context *ctx) {
    int64_t *in_dims = calloc((size_t)k->dims_offset[k->num_inputs] + 1, sizeof *in_dims);
    void **in = calloc((size_t)k->num_inputs + 1, sizeof *in);
    ort_status *st = NULL;
    if (!in_dims || !in)
        st = error(k->api, ORT_FAIL, "tc_graph kernel '%s': out of memory", k->entry);
    for (int32_t i = 0; i < k->num_inputs && !st; i++)
        st = input_dims(k, ctx, i, in_dims + k->dims_offset[i], &in[i]);
    if (!st) st = run_sized(k, ctx, in_dims, in);
    free(in_dims);
    free(in);
    return st;
}

/* A specialised kernel's run on inputs already read, whose dimensions (in_dims) its
 * sizes give: its outputs bound, then its phases (the inputs are not read again: 19
 * inputs of a BERT-style layer cost it 6 onnxruntime calls each). */
static ort_status *run_special(const tc_kernel *k, ort_kernel_context *ctx,
                               const int64_t *in_dims, void *const *in) {
    size_t n_in = (size_t)k->dims_offset[k->num_inputs];
    if (memcmp(in_dims, k->dims, n_in * sizeof *in_dims) != 0) return run_node(k, ctx);
    void **args = calloc((size_t)k->num_tensors + (size_t)k->num_temps + 1, sizeof *args);
    if (!args) return error(k->api, ORT_FAIL, "tc_graph kernel '%s': out of memory", k->entry);
    memcpy(args, in, (size_t)k->num_inputs * sizeof *args);
    ort_status *st = NULL;
    for (int32_t o = 0; o < k->num_outputs && !st; o++)
        st = bind_output(k, ctx, o, NULL, &args[k->num_inputs + o]);
    if (!st) st = run_once(k, ctx, args, args + k->num_tensors);
    free(args);
    return st;
}

/* Kernel for every size k's own run at the sizes tc_shapes gave (in dims, with the
 * temporaries' bytes and the phases' iterations), in a copy of the kernel for this run,
 * which then runs as a fixed-shape kernel does. */
static ort_status *run_here(const tc_kernel *k, ort_kernel_context *ctx, int64_t *dims,
                            void **args) {
    size_t n_dims = (size_t)k->dims_offset[k->num_tensors];
    size_t *bytes = calloc((size_t)k->num_tensors + 1, sizeof *bytes);
    if (!bytes) return error(k->api, ORT_FAIL, "tc_graph kernel '%s': out of memory", k->entry);
    tc_kernel run = *k;
    run.dims = dims;
    run.tensor_bytes = bytes;
    run.sizes = dims + n_dims;
    run.temp_bytes = run.sizes + k->num_sizes;
    run.phase_trips = run.temp_bytes + k->num_temps;
    ort_status *st = tensor_sizes(k, dims, bytes);
    for (int32_t o = 0; o < k->num_outputs && !st; o++)
        st = bind_output(&run, ctx, o, NULL, &args[k->num_inputs + o]);
    if (!st) st = run_once(&run, ctx, args, args + k->num_tensors);
    free(bytes);
    return st;
}

/* A run of kernel for every size k on inputs already read (dimensions in_dims, data in):
 * tc_shapes reads the sizes, checks the dimensions and computes the rest (or says why
 * not); then, at sizes a specialised kernel has, that kernel's run; or the run of the
 * node's other kernel for every size whose choices were made nearest them; else k's. */
static ort_status *run_sized(const tc_kernel *k, ort_kernel_context *ctx,
                             const int64_t *in_dims, void *const *in) {
    size_t n_in = (size_t)k->dims_offset[k->num_inputs];
    size_t n_dims = (size_t)k->dims_offset[k->num_tensors];
    size_t words = n_dims + (size_t)k->num_sizes + (size_t)k->num_temps + (size_t)k->num_phases;
    int64_t *dims = calloc(words + 1, sizeof *dims);
    void **args = calloc((size_t)k->num_tensors + (size_t)k->num_temps + 1, sizeof *args);
    ort_status *st = NULL;
    if (!dims || !args) {
        st = error(k->api, ORT_FAIL, "tc_graph kernel '%s': out of memory", k->entry);
    } else {
        memcpy(dims, in_dims, n_in * sizeof *dims);
        memcpy(args, in, (size_t)k->num_inputs * sizeof *args);
        int64_t *sizes = dims + n_dims, *temp_bytes = sizes + k->num_sizes;
        char why[TC_MESSAGE_BYTES / 2];
        if (k->shapes(dims, sizes, dims + n_in, temp_bytes, temp_bytes + k->num_temps, why,
                      sizeof why))
            st = error(k->api, ORT_INVALID_ARGUMENT, "tc_graph kernel '%s' (key %s): %s",
                       k->entry, k->key, why);
    }
    const tc_kernel *special = st ? NULL : special_at(k, dims + n_dims);
    const tc_kernel *other = st || special ? NULL : nearest_other(k, dims + n_dims);
    if (special)
        st = run_special(special, ctx, in_dims, in);
    else if (other)
        st = run_sized(other, ctx, in_dims, in);
    else if (!st)
        st = run_here(k, ctx, dims, args);
    free(dims);
    free(args);
    return st;
}

/* The most temporaries of any of a node's kernels. */
static int32_t most_temps(const tc_kernel *h) {
    int32_t most = h->num_rows ? 0 : h->num_temps;
    for (int32_t i = 0; i < h->num_rows; i++)
        if (h->variants[i].num_temps > most) most = h->variants[i].num_temps;
    return most;
}

static ort_status *compute_v2(void *p, ort_kernel_context *ctx) {
    const tc_kernel *h = p;
    const tc_kernel *k = h->num_rows ? &h->variants[0] : h;
    const ort_api *api = k->api;
    size_t n_in = 0, n_out = 0;
    ort_status *st =
        ORT_CALL(api, SLOT_KERNEL_CONTEXT_GET_INPUT_COUNT, context_count_fn)(ctx, &n_in);
    if (!st)
        st = ORT_CALL(api, SLOT_KERNEL_CONTEXT_GET_OUTPUT_COUNT, context_count_fn)(ctx, &n_out);
    if (st) return st;
    if (n_in != (size_t)k->num_inputs || n_out != (size_t)k->num_outputs)
        return error(api, ORT_INVALID_ARGUMENT,
                     "tc_graph kernel '%s' takes %d inputs and %d outputs, got %zu and %zu",
                     k->entry, k->num_inputs, k->num_outputs, n_in, n_out);
    return k->abi == TC_SIZES_ABI_VERSION ? run_every_size(k, ctx) : run_node(h, ctx);
}

/* A run of a fixed-shape node, or of a rows node (h) in chunks of its kernels. */
static ort_status *run_node(const tc_kernel *h, ort_kernel_context *ctx) {
    const tc_kernel *k = h->num_rows ? &h->variants[0] : h;
    const ort_api *api = k->api;
    tc_lead lead;
    ort_status *st = run_lead(h, ctx, &lead);
    if (st) return st;
    const tc_lead *led = h->num_rows ? &lead : NULL;

    /* args, the chunk's args, then temps in one per-run block: runs never share buffers. */
    size_t n = 2 * (size_t)k->num_tensors + (size_t)most_temps(h) + 1;
    void **args = calloc(n, sizeof *args);
    if (!args) return error(api, ORT_FAIL, "tc_graph kernel '%s': out of memory", k->entry);
    void **moved = args + k->num_tensors, **temps = moved + k->num_tensors;
    for (int32_t i = 0; i < k->num_inputs && !st; i++)
        st = bind_input(k, ctx, i, led && h->row_flags[i] ? led : NULL, &args[i]);
    for (int32_t o = 0; o < k->num_outputs && !st; o++)
        st = bind_output(k, ctx, o, led, &args[k->num_inputs + o]);
    if (!st && h->num_rows) {
        st = run_chunks(h, ctx, args, moved, temps, lead.rows);
    } else if (!st) {
        st = run_once(k, ctx, args, temps);
    }
    free(args);
    return st;
}

/* --------------------------------------------------------------------- the op description */

static const char *op_name(const tc_op *op) { (void)op; return "TcKernel"; }
static const char *op_provider(const tc_op *op) { (void)op; return NULL; /* CPU */ }
static int op_type(const tc_op *op, size_t i) { (void)op; (void)i; return ORT_TYPE_UNDEFINED; }
static size_t op_type_count(const tc_op *op) { (void)op; return 1; }
static int op_variadic(const tc_op *op, size_t i) {
    (void)op;
    (void)i;
    return ORT_CHARACTERISTIC_VARIADIC;
}
static int op_memory_type(const tc_op *op, size_t i) {
    (void)op;
    (void)i;
    return ORT_MEM_TYPE_DEFAULT;
}
static int op_min_arity(const tc_op *op) { (void)op; return 1; }
static int op_homogeneity(const tc_op *op) { (void)op; return 0; /* mixed dtypes */ }

/* Constant and static: onnxruntime keeps a pointer to it for as long as any session lives.
 * The op's version is the API version onnxruntime hands CreateKernelV2: one op per API
 * version the library can work with (kernel_dir reads the session config from 24 on). */
#define TC_OP(api_version)                                                                 \
    {                                                                                      \
        .version = (api_version), .get_name = op_name,                                    \
        .get_execution_provider_type = op_provider, .get_input_type = op_type,            \
        .get_input_type_count = op_type_count, .get_output_type = op_type,                \
        .get_output_type_count = op_type_count, .kernel_destroy = destroy_kernel,         \
        .get_input_characteristic = op_variadic, .get_output_characteristic = op_variadic, \
        .get_input_memory_type = op_memory_type,                                          \
        .get_variadic_input_min_arity = op_min_arity,                                     \
        .get_variadic_input_homogeneity = op_homogeneity,                                 \
        .get_variadic_output_min_arity = op_min_arity,                                    \
        .get_variadic_output_homogeneity = op_homogeneity,                                \
        .create_kernel_v2 = create_kernel_v2, .kernel_compute_v2 = compute_v2,            \
    }
static const tc_op tc_kernel_op = TC_OP(TC_ORT_API_VERSION);
static const tc_op tc_kernel_op_min = TC_OP(TC_ORT_API_MIN);

/* The entry point onnxruntime looks up after dlopen; NULL means success. The domain object
 * is not released: the session options and every session made from them point at it. */
TC_VISIBLE ort_status *RegisterCustomOps(ort_session_options *options, const ort_api_base *base) {
    if (!base || !base->get_api) return NULL;
    const tc_op *op = &tc_kernel_op;
    const ort_api *api = base->get_api(TC_ORT_API_VERSION);
    if (!api) {
        op = &tc_kernel_op_min;
        api = base->get_api(TC_ORT_API_MIN);
    }
    if (!api) {
        const ort_api *oldest = base->get_api(1);
        const char *version = base->get_version_string ? base->get_version_string() : "?";
        if (!oldest) return NULL;
        return error(oldest, ORT_FAIL,
                     "tc_graph's custom-op library needs onnxruntime API version %u "
                     "(onnxruntime 1.17 or newer); this onnxruntime is %s",
                     TC_ORT_API_MIN, version);
    }
    ort_domain *domain = NULL;
    ort_status *st =
        ORT_CALL(api, SLOT_CREATE_CUSTOM_OP_DOMAIN, create_domain_fn)("ai.tc_graph", &domain);
    if (st) return st;
    st = ORT_CALL(api, SLOT_CUSTOM_OP_DOMAIN_ADD, domain_add_fn)(domain, op);
    if (!st) st = ORT_CALL(api, SLOT_ADD_CUSTOM_OP_DOMAIN, add_domain_fn)(options, domain);
    if (st) ORT_CALL(api, SLOT_RELEASE_CUSTOM_OP_DOMAIN, release_domain_fn)(domain);
    return st;
}

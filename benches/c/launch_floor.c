/* The launch-overhead floor: a C loop calling cuLaunchKernel on an empty
 * kernel, with nothing between the calls. Loads libcuda at run time (dlopen),
 * so it needs no CUDA headers or toolkit, only the driver.
 *
 *   gcc -O2 -o launch_floor benches/c/launch_floor.c -ldl
 *   ./launch_floor EMPTY.ptx [iterations]
 *
 * Prints one JSON object: {"us_per_launch": ..., "us_per_roundtrip": ...}.
 */
#define _POSIX_C_SOURCE 199309L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUstream;

typedef CUresult (*cuInit_t)(unsigned);
typedef CUresult (*cuDeviceGet_t)(CUdevice *, int);
typedef CUresult (*cuDevicePrimaryCtxRetain_t)(CUcontext *, CUdevice);
typedef CUresult (*cuCtxSetCurrent_t)(CUcontext);
typedef CUresult (*cuModuleLoadData_t)(CUmodule *, const void *);
typedef CUresult (*cuModuleGetFunction_t)(CUfunction *, CUmodule, const char *);
typedef CUresult (*cuLaunchKernel_t)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                     unsigned, unsigned, CUstream, void **, void **);
typedef CUresult (*cuStreamSynchronize_t)(CUstream);

static void *sym(void *lib, const char *name) {
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "launch_floor: libcuda has no symbol %s\n", name);
        exit(2);
    }
    return p;
}

#define CHECK(call)                                                              \
    do {                                                                         \
        CUresult rc_ = (call);                                                   \
        if (rc_ != 0) {                                                          \
            fprintf(stderr, "launch_floor: %s failed with CUresult %d\n", #call, rc_); \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "launch_floor: cannot read %s\n", path);
        exit(2);
    }
    buf[n] = 0; /* the driver reads PTX as a C string */
    fclose(f);
    return buf;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s EMPTY.ptx [iterations]\n", argv[0]);
        return 2;
    }
    long iters = argc > 2 ? atol(argv[2]) : 200000;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "launch_floor: %s\n", dlerror());
        return 2;
    }
    cuInit_t cuInit = (cuInit_t)sym(lib, "cuInit");
    cuDeviceGet_t cuDeviceGet = (cuDeviceGet_t)sym(lib, "cuDeviceGet");
    cuDevicePrimaryCtxRetain_t retain =
        (cuDevicePrimaryCtxRetain_t)sym(lib, "cuDevicePrimaryCtxRetain");
    cuCtxSetCurrent_t cuCtxSetCurrent = (cuCtxSetCurrent_t)sym(lib, "cuCtxSetCurrent");
    cuModuleLoadData_t cuModuleLoadData = (cuModuleLoadData_t)sym(lib, "cuModuleLoadData");
    cuModuleGetFunction_t cuModuleGetFunction =
        (cuModuleGetFunction_t)sym(lib, "cuModuleGetFunction");
    cuLaunchKernel_t cuLaunchKernel = (cuLaunchKernel_t)sym(lib, "cuLaunchKernel");
    cuStreamSynchronize_t cuStreamSynchronize =
        (cuStreamSynchronize_t)sym(lib, "cuStreamSynchronize");

    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(retain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    char *ptx = read_file(argv[1]);
    CHECK(cuModuleLoadData(&mod, ptx));
    CHECK(cuModuleGetFunction(&fn, mod, "empty"));

    for (int i = 0; i < 1000; i++) /* warm up */
        CHECK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    CHECK(cuStreamSynchronize(NULL));

    double t0 = now_us();
    for (long i = 0; i < iters; i++)
        CHECK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    CHECK(cuStreamSynchronize(NULL));
    double launch = (now_us() - t0) / (double)iters;

    long rt_iters = iters / 10 > 0 ? iters / 10 : 1;
    t0 = now_us();
    for (long i = 0; i < rt_iters; i++) {
        CHECK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
        CHECK(cuStreamSynchronize(NULL));
    }
    double roundtrip = (now_us() - t0) / (double)rt_iters;

    printf("{\"us_per_launch\": %.4f, \"us_per_roundtrip\": %.4f, \"iterations\": %ld}\n", launch,
           roundtrip, iters);
    free(ptx);
    return 0;
}

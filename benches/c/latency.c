/* Per-call latency harness, loaded with ctypes by benches/cpu_latency.py.
 * Times any implementation through a function pointer (C, a Numba cfunc, or
 * the zyntax JIT entry with its lowered ABI): arguments are re-read through
 * volatile loads before each call so nothing is hoisted, and each call is
 * batch of calls bracketed by rdtsc; the caller subtracts `empty_ticks`,
 * divides by the batch and converts ticks to ns. Every implementation goes through the same loop. */
#include <stdbool.h>
#include <stdint.h>
#include <x86intrin.h>

uint64_t zx_rdtsc(void) { return __rdtsc(); }

/* Median-free raw samples of an empty timed region (the rdtsc pair). */
void empty_ticks(int64_t n, uint64_t *out) {
    for (int64_t i = 0; i < n; i++) {
        uint64_t a = __rdtsc();
        __asm__ volatile("" ::: "memory");
        uint64_t b = __rdtsc();
        out[i] = b - a;
    }
}

typedef int64_t (*ob_c)(double *, double *, int64_t, int64_t, double, double);
typedef int64_t (*ob_zx)(double *, double *, int64_t, int64_t, double, double, int64_t, int64_t, void *);
typedef bool (*rc_c)(int64_t, int64_t, double, double, int64_t, double, double);
typedef bool (*rc_zx)(int64_t, int64_t, double, double, int64_t, double, double, void *);
typedef int32_t (*ma_c)(double *, int64_t *, int64_t, double, int64_t, int64_t);
typedef int32_t (*ma_zx)(double *, int64_t *, int64_t, double, int64_t, int64_t, int64_t, int64_t, void *);
typedef double (*pu_c)(double *, double, double);
typedef double (*pu_zx)(double *, double, double, int64_t, void *);

static volatile double vsink;

#define V(x) (*(volatile __typeof__(x) *)&(x))
/* One sample = `batch` calls between two rdtsc reads: the TSC of some CPUs
 * (AMD Zen) advances in steps of ~25 ticks, too coarse for one call. */
#define LOOP(CALL)                                   \
    for (int64_t i = 0; i < n + warm; i++) {         \
        uint64_t a = __rdtsc();                      \
        for (int64_t j = 0; j < batch; j++) {        \
            READ;                                    \
            __typeof__(CALL) r = CALL;               \
            vsink = (double)r;                       \
        }                                            \
        uint64_t b = __rdtsc();                      \
        if (i >= warm) out[i - warm] = b - a;        \
    }

/* kind: 0 = C ABI (C, Numba cfunc), 1 = zyntax ABI (lengths + error record). */
void time_orderbook(int kind, void *fn, double *prices, double *sizes, int64_t depth, int64_t cap,
                    double price, double size, int64_t len, int64_t n, int64_t warm, int64_t batch, uint64_t *out) {
    int64_t err[6] = {0};
    double p, s; int64_t d, c;
#define READ p = V(price); s = V(size); d = V(depth); c = V(cap)
    if (kind == 0) { ob_c f = (ob_c)fn; LOOP(f(prices, sizes, d, c, p, s)) }
    else { ob_zx f = (ob_zx)fn; LOOP(f(prices, sizes, d, c, p, s, len, len, err)) }
#undef READ
}

void time_risk(int kind, void *fn, int64_t position, int64_t qty, double price, double ref,
               int64_t max_pos, double max_notional, double band, int64_t n, int64_t warm, int64_t batch, uint64_t *out) {
    int64_t err[6] = {0};
    int64_t a0, a1, a4; double a2, a3, a5, a6;
#define READ a0 = V(position); a1 = V(qty); a2 = V(price); a3 = V(ref); a4 = V(max_pos); a5 = V(max_notional); a6 = V(band)
    if (kind == 0) { rc_c f = (rc_c)fn; LOOP(f(a0, a1, a2, a3, a4, a5, a6)) }
    else { rc_zx f = (rc_zx)fn; LOOP(f(a0, a1, a2, a3, a4, a5, a6, err)) }
#undef READ
}

void time_ma(int kind, void *fn, double *ring, int64_t *state, int64_t cap, double price,
             int64_t fast, int64_t slow, int64_t n, int64_t warm, int64_t batch, uint64_t *out) {
    int64_t err[6] = {0};
    int64_t c, fa, sl; double p;
#define READ c = V(cap); p = V(price); fa = V(fast); sl = V(slow)
    if (kind == 0) { ma_c f = (ma_c)fn; LOOP(f(ring, state, c, p, fa, sl)) }
    else { ma_zx f = (ma_zx)fn; LOOP(f(ring, state, c, p, fa, sl, c, 2, err)) }
#undef READ
}

void time_position(int kind, void *fn, double *pos, double qty, double price, int64_t n,
                   int64_t warm, int64_t batch, uint64_t *out) {
    int64_t err[6] = {0};
    double q, p;
#define READ q = V(qty); p = V(price)
    if (kind == 0) { pu_c f = (pu_c)fn; LOOP(f(pos, q, p)) }
    else { pu_zx f = (pu_zx)fn; LOOP(f(pos, q, p, 3, err)) }
#undef READ
}

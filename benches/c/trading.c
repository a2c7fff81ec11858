/* The trading functions of benches/zir/trading.zir, in C, as the peer of the
 * zyntax CPU backend in benches/cpu_latency.py (gcc/clang -O3 -march=native).
 * Same algorithms, statement for statement. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#define NOINLINE __attribute__((noinline))

/* Sorted-ascending book side: update, delete (size 0) or insert a level. */
NOINLINE int64_t orderbook_update(double *prices, double *sizes, int64_t depth,
                                  int64_t cap, double price, double size) {
    int64_t pos = 0;
    for (int64_t k = 0; k < depth; k++) pos += prices[k] < price;
    if (pos < depth && prices[pos] == price) {
        if (size != 0.0) {
            sizes[pos] = size;
            return depth;
        }
        int64_t nd = depth - 1;
        for (int64_t j = pos; j < nd; j++) {
            prices[j] = prices[j + 1];
            sizes[j] = sizes[j + 1];
        }
        return nd;
    }
    if (size == 0.0 || depth >= cap) return depth;
    for (int64_t j = depth; j > pos; j--) {
        prices[j] = prices[j - 1];
        sizes[j] = sizes[j - 1];
    }
    prices[pos] = price;
    sizes[pos] = size;
    return depth + 1;
}

NOINLINE bool risk_check(int64_t position, int64_t qty, double price, double ref,
                         int64_t max_pos, double max_notional, double band) {
    int64_t np = position + qty;
    bool ok_pos = (np < 0 ? -np : np) <= max_pos;
    bool ok_notional = fabs((double)qty * price) <= max_notional;
    bool ok_band = fabs(price - ref) <= band * ref;
    return ok_pos & ok_notional & ok_band;
}

NOINLINE int32_t ma_signal(double *ring, int64_t *state, int64_t cap, double price,
                           int64_t fast, int64_t slow) {
    int64_t head = state[0], count = state[1];
    ring[head] = price;
    int64_t h2 = head + 1;
    state[0] = h2 == cap ? 0 : h2;
    int64_t c2 = count + 1 < cap ? count + 1 : cap;
    state[1] = c2;
    int64_t nf = fast < c2 ? fast : c2, ns = slow < c2 ? slow : c2;
    double ss = 0.0, sf = 0.0;
    for (int64_t k = 0; k < ns; k++) {
        int64_t i = head - k;
        i = i < 0 ? i + cap : i;
        double x = ring[i];
        ss += x;
        sf += k < nf ? x : 0.0;
    }
    double f = sf / (double)nf, s = ss / (double)ns;
    return f > s ? 1 : (f < s ? -1 : 0);
}

NOINLINE double position_update(double *pos, double fill_qty, double fill_price) {
    double q = pos[0], avg = pos[1], realized = pos[2];
    double nq = q + fill_qty;
    bool same = q * fill_qty >= 0.0;
    double add_avg = fma(q, avg, fill_qty * fill_price) / nq;
    double aq = fabs(q), af = fabs(fill_qty);
    double closed = fmin(af, aq) * (q > 0.0 ? 1.0 : -1.0);
    double pnl_red = closed * (fill_price - avg);
    double red_avg = af > aq ? fill_price : avg;
    double avg2 = same ? add_avg : red_avg;
    double pnl = same ? 0.0 : pnl_red;
    pos[0] = nq;
    pos[1] = nq == 0.0 ? 0.0 : avg2;
    pos[2] = realized + pnl;
    return pnl;
}

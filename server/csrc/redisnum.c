/* Redis-exact number parsing and printing.
 *
 * Redis parses and prints floating point numbers with the C library
 * (strtod, strtold, snprintf "%.17g" and "%.17Lf") and does INCRBYFLOAT in
 * `long double`. Rust has neither `long double` nor C's accepted syntax
 * ("0x1p3", "infinity", ...), so these few functions are C, written after
 * Redis 7.0's util.c (string2ld, ld2string) and object.c (getDoubleFromObject).
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LONG_DOUBLE_CHARS (5 * 1024)

/* Like Redis string2ld: returns 1 and stores the value, or 0 when `s` is not
 * a valid long double (empty, leading space, trailing garbage, overflow,
 * NaN). */
static int string2ld(const char *s, size_t slen, long double *dp) {
    char buf[MAX_LONG_DOUBLE_CHARS];
    long double value;
    char *eptr;
    if (slen == 0 || slen >= sizeof(buf)) return 0;
    memcpy(buf, s, slen);
    buf[slen] = '\0';
    errno = 0;
    value = strtold(buf, &eptr);
    if (isspace((unsigned char)buf[0]) || eptr[0] != '\0' || (size_t)(eptr - buf) != slen ||
        ((errno == ERANGE) && (value == HUGE_VALL || value == -HUGE_VALL || fpclassify(value) == FP_ZERO)) ||
        errno == EINVAL || isnan(value))
        return 0;
    *dp = value;
    return 1;
}

/* Redis ld2string(..., LD_STR_HUMAN): "%.17Lf" with trailing zeros removed. */
static int ld2string_human(char *buf, size_t len, long double value) {
    int l;
    if (isinf(value)) {
        if (value > 0) { memcpy(buf, "inf", 3); return 3; }
        memcpy(buf, "-inf", 4);
        return 4;
    }
    l = snprintf(buf, len, "%.17Lf", value);
    if (l < 0 || (size_t)l + 1 > len) return 0;
    if (strchr(buf, '.') != NULL) {
        char *p = buf + l - 1;
        while (*p == '0') { p--; l--; }
        if (*p == '.') l--;
    }
    if (l == 2 && buf[0] == '-' && buf[1] == '0') { buf[0] = '0'; l = 1; }
    return l;
}

/* INCRBYFLOAT. `cur` is the stored value (NULL when the key is absent).
 * Returns 0 and writes the new value's text to out/outlen, 1 when either
 * operand is not a valid float, 2 when the result is NaN or infinite, 3 when
 * the result does not fit `out`. */
int coordis_incrbyfloat(const char *cur, size_t curlen, const char *incr, size_t incrlen,
                        char *out, size_t outcap, size_t *outlen) {
    long double value = 0, by;
    if (cur != NULL && !string2ld(cur, curlen, &value)) return 1;
    if (!string2ld(incr, incrlen, &by)) return 1;
    value += by;
    if (isnan(value) || isinf(value)) return 2;
    int l = ld2string_human(out, outcap, value);
    if (l <= 0) return 3;
    *outlen = (size_t)l;
    return 0;
}

/* Redis getDoubleFromObject: strtod with Redis's rejections. Returns 1 and
 * stores the value, or 0 when `s` is not a valid double. */
int coordis_string2d(const char *s, size_t slen, double *dp) {
    char buf[MAX_LONG_DOUBLE_CHARS];
    char *eptr;
    double value;
    if (slen == 0 || slen >= sizeof(buf)) return 0;
    memcpy(buf, s, slen);
    buf[slen] = '\0';
    errno = 0;
    value = strtod(buf, &eptr);
    if (isspace((unsigned char)buf[0]) || (size_t)(eptr - buf) != slen ||
        (errno == ERANGE && (value == HUGE_VAL || value == -HUGE_VAL || value == 0)) || isnan(value))
        return 0;
    *dp = value;
    return 1;
}

/* "%.17g", as Redis 7.0's addReplyDouble prints a finite double. */
int coordis_fmt_g17(double d, char *out, size_t outcap) {
    int l = snprintf(out, outcap, "%.17g", d);
    if (l < 0 || (size_t)l >= outcap) return 0;
    return l;
}

/* A score range bound as Redis's zslParseRange reads it (after any '('):
 * plain strtod on the NUL-terminated argument, accepted when strtod stops at
 * the terminator (an empty string is 0, leading spaces and overflow to inf
 * are accepted) and the value is not NaN. Returns 1 and stores the value,
 * or 0. */
int coordis_strtod_range(const char *s, size_t slen, double *dp) {
    char buf[MAX_LONG_DOUBLE_CHARS];
    char *eptr;
    double value;
    if (slen >= sizeof(buf)) return 0;
    memcpy(buf, s, slen);
    buf[slen] = '\0';
    value = strtod(buf, &eptr);
    if (eptr[0] != '\0' || isnan(value)) return 0;
    *dp = value;
    return 1;
}

/* Redis getTimeoutFromObjectOrReply in seconds: the argument read as a long
 * double (string2ld's rules), times 1000, rounded up, converted to long
 * long. Returns 0 when the argument is not a valid float; otherwise 1 and
 * the milliseconds, negative for a negative timeout. A value out of the
 * range of long long converts as x86-64 converts it (LLONG_MIN, which Redis
 * then calls negative: `inf` and `1e400` are "timeout is negative"). */
int coordis_timeout_ms(const char *s, size_t slen, long long *ms) {
    long double value;
    if (!string2ld(s, slen, &value)) return 0;
    long double t = ceill(value * 1000.0);
    if (!(t >= -9223372036854775808.0L && t < 9223372036854775808.0L))
        *ms = (-9223372036854775807LL - 1);
    else
        *ms = (long long)t;
    return 1;
}

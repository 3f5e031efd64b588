#ifndef AG_BYTES_H
#define AG_BYTES_H
// Byte scans over 16 bytes at a time with SSE2 (part of x86-64's baseline), inlined into the
// Swift callers through the importer. Other targets test the bytes one at a time.
#include <stdint.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/// A bit per byte of `bytes[0..<16]` (bit i for byte i) that is not a visible field-content
/// byte in the sense of RFC 9110 section 5.5: at or below 0x20 (SP, HTAB, CR, LF, NUL, other
/// controls) or DEL 0x7F. obs-text (0x80-0xFF) is visible. The caller guarantees 16 readable
/// bytes.
static inline uint32_t ag_invisible_mask16(const uint8_t *bytes) {
#if defined(__SSE2__)
    __m128i v = _mm_loadu_si128((const __m128i *)bytes);
    // v >= 0x21 (unsigned) exactly where max(v, 0x21) == v.
    __m128i atLeast21 = _mm_cmpeq_epi8(_mm_max_epu8(v, _mm_set1_epi8(0x21)), v);
    __m128i del = _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7F));
    uint32_t visible = (uint32_t)_mm_movemask_epi8(_mm_andnot_si128(del, atLeast21));
    return ~visible & 0xFFFFu;
#else
    uint32_t mask = 0;
    for (int i = 0; i < 16; i++) {
        if (bytes[i] <= 0x20 || bytes[i] == 0x7F) mask |= 1u << i;
    }
    return mask;
#endif
}

/// A bit per byte of `bytes[0..<16]` (bit i for byte i) that is not an RFC 9110 `tchar`
/// (section 5.6.2: ``!#$%&'*+-.^_`|~``, digits and letters). The caller guarantees 16
/// readable bytes.
static inline uint32_t ag_nontoken_mask16(const uint8_t *bytes) {
#if defined(__SSE2__)
    __m128i v = _mm_loadu_si128((const __m128i *)bytes);
    // Visible ASCII 0x21-0x7E: as signed bytes above 0x20 and below 0x7F (0x80-0xFF are negative).
    __m128i visible = _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8(0x20)), _mm_cmplt_epi8(v, _mm_set1_epi8(0x7F)));
    // The delimiters among them: DQUOTE and (),/:;<=>?@[\]{}
    __m128i delimiter = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(0x22)), _mm_cmpeq_epi8(v, _mm_set1_epi8(0x28)));
    delimiter = _mm_or_si128(delimiter, _mm_cmpeq_epi8(v, _mm_set1_epi8(0x29)));
    delimiter = _mm_or_si128(delimiter, _mm_cmpeq_epi8(v, _mm_set1_epi8(0x2C)));
    delimiter = _mm_or_si128(delimiter, _mm_cmpeq_epi8(v, _mm_set1_epi8(0x2F)));
    delimiter = _mm_or_si128(delimiter, _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7B)));
    delimiter = _mm_or_si128(delimiter, _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7D)));
    // 0x3A-0x40 and 0x5B-0x5D: x - low <= width (unsigned) exactly where min(x - low, width) == x - low.
    __m128i colonToAt = _mm_sub_epi8(v, _mm_set1_epi8(0x3A));
    delimiter = _mm_or_si128(delimiter, _mm_cmpeq_epi8(_mm_min_epu8(colonToAt, _mm_set1_epi8(6)), colonToAt));
    __m128i brackets = _mm_sub_epi8(v, _mm_set1_epi8(0x5B));
    delimiter = _mm_or_si128(delimiter, _mm_cmpeq_epi8(_mm_min_epu8(brackets, _mm_set1_epi8(2)), brackets));
    uint32_t token = (uint32_t)_mm_movemask_epi8(_mm_andnot_si128(delimiter, visible));
    return ~token & 0xFFFFu;
#else
    static const char tchars[] = "!#$%&'*+-.^_`|~";
    uint32_t mask = 0;
    for (int i = 0; i < 16; i++) {
        uint8_t byte = bytes[i];
        int token = (byte >= '0' && byte <= '9') || ((byte | 0x20) >= 'a' && (byte | 0x20) <= 'z');
        for (const char *t = tchars; !token && *t; t++) token = byte == (uint8_t)*t;
        if (!token) mask |= 1u << i;
    }
    return mask;
#endif
}
#endif

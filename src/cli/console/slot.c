/* Redis Cluster's key slot: CRC16 (XMODEM: polynomial 0x1021, initial 0)
 * of the key, modulo 16384; when the key holds "{...}" with something
 * between the first '{' and the next '}', only that part is hashed, so
 * keys sharing a tag share a slot (the cluster specification's rule). */
#include <stdint.h>

#include "console.h"

static uint16_t crc16(const unsigned char *p, size_t n)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < n; i++) {
        crc ^= (uint16_t)(p[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

unsigned slot_of(const char *key, size_t len)
{
    const unsigned char *k = (const unsigned char *)key;
    size_t open = 0;
    while (open < len && k[open] != '{')
        open++;
    if (open < len) {
        size_t close = open + 1;
        while (close < len && k[close] != '}')
            close++;
        if (close < len && close > open + 1)
            return crc16(k + open + 1, close - open - 1) & (CN_SLOTS - 1);
    }
    return crc16(k, len) & (CN_SLOTS - 1);
}

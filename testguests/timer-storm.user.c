/* timer-storm, ring 3 half (ring 0 calls it too): a checksum loop interrupts must not disturb. */
#include "user.h"
#include "timer-storm.h"

uint32_t storm_data[STORM_WORDS];
uint32_t storm_reference;
volatile uint32_t storm_ticks, storm_target;

/* FNV-1a over storm_data: keeps several registers live across interrupts. */
uint32_t storm_checksum(void)
{
    uint32_t h = 2166136261u;

    for (unsigned i = 0; i < STORM_WORDS; i++) {
        h ^= storm_data[i];
        h *= 16777619u;
    }
    return h;
}

uint32_t storm_busy(void)
{
    uint32_t wrong = 0;

    while (storm_ticks < storm_target)
        wrong += storm_checksum() != storm_reference;
    return wrong;
}

void storm_user_busy(void)
{
    uexit(storm_busy());
}

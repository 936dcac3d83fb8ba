/* The version `ring3 --version` and `ring3 run --version` print. */
#ifndef RING3_LIB_VERSION_H
#define RING3_LIB_VERSION_H

#define RING3_VERSION "0.1"

#endif

#ifndef LA_CKEYUTILS_SHIM_H
#define LA_CKEYUTILS_SHIM_H

/* keyutils: the kernel's key retention service (add_key, keyctl), where the embedded engine keeps a store's
 * unlocked class keys: per user, shared by the user's processes, never on disk, gone at reboot. */
#include <keyutils.h>

#endif

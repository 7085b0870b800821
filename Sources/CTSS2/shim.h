#ifndef LA_CTSS2_SHIM_H
#define LA_CTSS2_SHIM_H

/* tpm2-tss: ESAPI, the TCTI loader, marshalling and error texts. The objects' templates are compiled in
 * Sources/CTSS2Templates. */
#include <string.h>
#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_sys.h>
#include <tss2/tss2_tctildr.h>

#endif

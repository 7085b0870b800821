// LocalAuthentication: Apple's LAContext, LAError, LARight, LAPersistedRight and LARightStore.

// Enclave: the device root key, protection-class keys and enclave-held P-256 keys. Built with the keychain and LAContext issues.

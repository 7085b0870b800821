// KeychainServices: Apple's SecItem*, SecAccessControl, SecKey*, kSec* constants and OSStatus codes.

// KeychainStore: the encrypted SQLite keychain database (GRDB) and its item codec. Built in the keychain issue.

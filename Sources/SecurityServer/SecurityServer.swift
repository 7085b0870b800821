// SecurityServer: the engine, the only code that touches state (keychain rules, ACLs, contexts, rights, lockout).

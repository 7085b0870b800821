extension KeychainRequest {
    /// Whether the request is brief: an add, a lookup of one item (no match limit, Apple's default, or a limit of one:
    /// `kSecMatchLimitOne` or 1), the lock and its state, the sealing state. localauthd runs such a request that cannot
    /// prompt on the connection's own thread (an event loop, or the lane's); a lookup of every match, an update or
    /// delete (which may touch many items) and a backup (password derivation, the whole store) run on a store thread,
    /// so they never hold up other connections.
    package var isBrief: Bool {
        switch self {
        case .add, .lock, .lockState, .sealingState: true
        case .copyMatching(let query):
            // One lookup of the limit: this runs for every request a client considers for the lane.
            switch query[ItemKey.matchLimit] {
            case nil, .integer(1)?, .string(ItemKey.matchLimitOne)?: true
            default: false
            }
        case .update, .delete, .exportBackup, .importBackup, .checkStore, .restoreBackup: false
        }
    }
}

extension KeychainRequest {
    /// Whether a client sends the request over localauthd's lane (when it cannot prompt): brief, and naming no
    /// authentication context (a context belongs to the main connection, and the engine refuses it elsewhere).
    package var mayTakeLane: Bool {
        switch self {
        case .add(let dictionary), .copyMatching(let dictionary):
            isBrief && dictionary[ItemKey.authenticationContext] == nil
        default: isBrief
        }
    }
}

extension KeyRequest {
    /// Whether localauthd's lane may serve the request (when it cannot prompt): a use of an existing key — sign,
    /// decrypt, key exchange — that names no authentication context (a context belongs to the main connection).
    package var mayTakeLane: Bool {
        switch self {
        case .sign(_, _, let context), .decrypt(_, _, _, let context), .keyExchange(_, _, _, let context):
            context == nil
        case .generate, .attestationIdentity, .attest: false
        }
    }
}

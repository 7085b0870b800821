import Foundation
import SecurityProtocol

extension KeychainEngine {
    /// `caller` holding what its hello claimed beyond its own groups (``CallerIdentity/heldBackClaim``), once
    /// context `id` of its connection proves that the user just authenticated through this engine
    /// (``AuthenticationContexts/spendRecentAuthentication(in:)``, which spends the context).
    ///
    /// What an administrative tool such as `lactl` may do for any program of its user is thereby asked of the
    /// user, as macOS asks before `security` touches another application's item.
    ///
    /// - Throws: `KeychainStatus(.missingEntitlement)` when nothing is held back (only an administrative tool's
    ///   claims are); `AuthenticationError` (`invalidContext` for another connection's context, `authenticationFailed`
    ///   without a recent finger or passcode in it).
    package func widening(_ caller: CallerIdentity, context id: AuthenticationContextID) throws -> CallerIdentity {
        guard caller.heldBackClaim != nil else {
            throw KeychainStatus(
                .missingEntitlement,
                "this connection holds every group it may: only an administrative tool's claims wait for the user")
        }
        guard let contexts = authentication else {
            throw AuthenticationError(.invalidContext, "this keychain engine was opened without authenticators")
        }
        try contexts.requireOwner(id, connection: caller.connection)
        try contexts.spendRecentAuthentication(in: id)
        return caller.grantingHeldBackClaim
    }
}

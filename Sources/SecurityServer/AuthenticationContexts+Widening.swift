import Foundation
import SecurityProtocol

extension AuthenticationContexts {
    /// How recent the user's finger or passcode must be to widen a connection's access groups: long enough for the
    /// client to send its request after the evaluation answered, too short to keep a credential for later.
    package static let wideningWindow: TimeInterval = 10

    /// Spends the credential that context `id` holds from a finger or passcode the engine itself checked (not a
    /// reused fingerprint match) in the last ``wideningWindow`` seconds, for this store's user: its credentials are
    /// cleared and the context invalidated, so one evaluation widens one connection once.
    ///
    /// - Throws: `authenticationFailed` without such a credential (the context is left as it was),
    ///   `invalidContext` for an unknown or invalidated context.
    func spendRecentAuthentication(in id: AuthenticationContextID) throws {
        let now = configuration.clock.now()
        let user = configuration.username
        let spent = try withRecord(id) { record -> Bool in
            let recent = record.credentials.values.contains { credential in
                let age = now.timeIntervalSince(credential.time)
                return !credential.isReused && credential.user == user && age >= 0 && age <= Self.wideningWindow
            }
            if recent { record.credentials = [:] }
            return recent
        }
        guard spent else {
            throw AuthenticationError(
                .authenticationFailed,
                "using the items of other applications needs the user's finger or passcode, checked by the keychain "
                    + "on this connection in the last \(Int(Self.wideningWindow)) seconds")
        }
        invalidate(id)
    }
}

import Authenticators
import Foundation
import SecurityProtocol

extension KeychainEngine {
    /// Serves one administrative request for `caller`, reporting progress to `progress` (on the authenticators'
    /// threads) before it returns the answer.
    ///
    /// - Throws: `AuthenticationError` (`authenticationFailed` without the passcode credential a change needs,
    ///   `invalidContext` for another client's context, and what the authenticators throw); `KeychainStatus`
    ///   when the store fails.
    package func handle(
        _ request: AdministrationRequest, caller: CallerIdentity,
        progress: @escaping @Sendable (AdministrationEvent) -> Void = { _ in }
    ) async throws -> AdministrationEvent {
        if case .callerIdentity = request {  // needs no authenticators
            var info = caller.info
            info.enclave = enclave.backend.description
            return .caller(info)
        }
        guard let contexts = authentication else {
            throw AuthenticationError(.invalidContext, "this keychain engine was opened without authenticators")
        }
        if let id = request.contextID { try contexts.requireOwner(id, connection: caller.connection) }
        switch request {
        case .enroll(let finger, let id):
            return .enrolled(
                try await contexts.enroll(finger: finger, context: id) { progress(.enrollment($0)) })
        case .removePrint(let identifier, let id):
            try await contexts.removePrint(identifier, context: id)
            return .success
        case .enrolledPrints:
            // The list stands without the hash where the hash cannot be computed (fprintd's store unreadable).
            return .prints(try contexts.biometric.enrolledPrints(), stateHash: try? contexts.biometric.stateHash())
        case .reader:
            return .reader(try await contexts.biometric.open())
        case .verifyFinger:
            return .matched(try await contexts.biometric.verify { progress(.verification($0)) })
        case .passcodeRemoved(let id):
            try contexts.requireRecentPasscode(in: id)
            try setPasscodeSet(false)
            contexts.environmentMayHaveChanged()
            return .success
        case .closeReader:
            await contexts.closeReader()
            return .success
        case .callerIdentity:
            return .caller(caller.info)
        case .widenAccessGroups:
            // A connection's groups change only in localauthd's session (DaemonSession), which answers this itself.
            throw KeychainStatus(.unimplemented, "only localauthd widens a connection's access groups")
        }
    }
}

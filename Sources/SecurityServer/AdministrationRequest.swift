import Authenticators
import Foundation
import SecurityProtocol

/// Administrative requests: the user's enrolled fingerprints, the reader, and the passcode's removal, each under
/// the authentication Apple's devices ask for (changing fingerprints or removing the passcode needs the passcode
/// first). What `lactl`, the examples and the tests do instead of reaching into the engine.
package enum AdministrationRequest: Sendable {
    /// Enrolls `finger` (replacing an earlier print of it); the context must hold a passcode credential (not a
    /// reused one) from the last five minutes. Progress arrives as ``AdministrationEvent/enrollment(_:)``; the
    /// answer is ``AdministrationEvent/enrolled(_:)``.
    case enroll(Finger, context: AuthenticationContextID)
    /// Removes an enrolled print, under the same rule as ``enroll(_:context:)``.
    case removePrint(PrintIdentifier, context: AuthenticationContextID)
    /// The enrolled prints (without templates) and the enrolled-set state hash.
    case enrolledPrints
    /// Opens the reader and describes it.
    case reader
    /// Waits for a finger and says which print it matched (counted as an attempt, as any scan is). Progress
    /// arrives as ``AdministrationEvent/verification(_:)``.
    case verifyFinger
    /// Records that the user's passcode was removed: every `WhenPasscodeSetThisDeviceOnly` item is destroyed, as
    /// Apple does. The context must hold a recent passcode credential (the last use of the passcode).
    case passcodeRemoved(context: AuthenticationContextID)
    /// Releases the reader (another program may use it).
    case closeReader
}

/// What an administrative request reports: progress while it runs, then one answer.
package enum AdministrationEvent: Sendable, Equatable {
    case enrollment(EnrollmentEvent)
    case verification(VerificationEvent)
    case enrolled(EnrolledPrintInfo)
    case prints([EnrolledPrintInfo], stateHash: Data?)
    case reader(ReaderInfo)
    case matched(EnrolledPrintInfo)
    case success
}

extension AdministrationRequest {
    var contextID: AuthenticationContextID? {
        switch self {
        case .enroll(_, let id), .removePrint(_, let id), .passcodeRemoved(let id): id
        case .enrolledPrints, .reader, .verifyFinger, .closeReader: nil
        }
    }
}

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
            return .prints(try contexts.biometric.enrolledPrints(), stateHash: try contexts.biometric.stateHash())
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
        }
    }
}

import Foundation
import SecurityProtocol

extension AuthenticationContexts {
    /// How recent a passcode success must be to change the enrolled fingerprints.
    package static let enrollmentPasscodeWindow: TimeInterval = 300

    /// Enrolls a finger for the configured user, as Apple's devices do only after the passcode: context `id` must
    /// hold a passcode credential (not a reused one) from the last five minutes.
    ///
    /// - Throws: `authenticationFailed` without such a credential (nothing is scanned), `invalidContext`, and what
    ///   ``BiometricAuthenticator/enroll(finger:progress:)`` throws.
    package func enroll(
        finger: Finger, context id: AuthenticationContextID,
        progress: @escaping @Sendable (EnrollmentEvent) -> Void = { _ in }
    ) async throws -> EnrolledPrintInfo {
        try requireRecentPasscode(in: id)
        defer { environmentMayHaveChanged() }
        return try await biometric.enroll(finger: finger, progress: progress)
    }

    /// Removes an enrolled print, under the same rule as ``enroll(finger:context:progress:)``.
    package func removePrint(_ identifier: PrintIdentifier, context id: AuthenticationContextID) async throws {
        try requireRecentPasscode(in: id)
        defer { environmentMayHaveChanged() }
        try await biometric.remove(identifier)
    }

    /// Throws `authenticationFailed` unless context `id` holds a passcode credential (not a reused one) from the
    /// last five minutes.
    func requireRecentPasscode(in id: AuthenticationContextID) throws {
        let now = configuration.clock.now()
        let recent = try credentials(for: id).contains { credential in
            let age = now.timeIntervalSince(credential.time)
            return credential.method == .passcode && !credential.isReused && age >= 0
                && age <= Self.enrollmentPasscodeWindow
        }
        guard recent else {
            throw AuthenticationError(
                .authenticationFailed, "changing the enrolled fingerprints needs the passcode first")
        }
    }
}

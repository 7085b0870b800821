import Foundation
import LocalAuthentication
import TestSupport
import Testing

/// Code written for Apple platforms (shaped as Apple's documentation shows it), unchanged.
@Suite("Apple-style LAContext code", .serialized, .virtualReaderLock)
struct AppleSnippetTests {
    /// Apple's "Logging a User into Your App with Face ID or Touch ID" flow, with its error `switch`.
    static func authenticate(completion: @escaping @Sendable (Bool, String) -> Void) {
        let context = LAContext()
        var error: NSError?
        if context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error) {
            let reason = "Log in to your account"
            context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: reason) {
                success, error in
                if success {
                    completion(true, "logged in")
                } else {
                    completion(false, (error as? LAError).map { message(for: $0.code) } ?? "unknown")
                }
            }
        } else {
            guard let error = error else { return completion(false, "unknown") }
            completion(false, message(for: LAError.Code(rawValue: error.code) ?? .authenticationFailed))
        }
    }

    static func message(for code: LAError.Code) -> String {
        switch code {
        case .biometryNotAvailable: return "Biometry is not available on this device."
        case .biometryNotEnrolled: return "The user has no enrolled biometric identities."
        case .biometryLockout: return "Biometry is locked out."
        case LAError.authenticationFailed: return "There was a problem verifying your identity."
        case LAError.userCancel: return "You pressed cancel."
        case LAError.userFallback: return "You pressed password."
        case .touchIDNotAvailable: return "unreachable: an alias of biometryNotAvailable"
        default: return "Face ID/Touch ID may not be configured"
        }
    }

    @Test func appleStyleCodeCompilesAndReportsAMissingReader() async throws {
        let world = try LocalAuthenticationWorld(reader: false)
        let outcome = try await world.run {
            await withCheckedContinuation { (continuation: CheckedContinuation<(Bool, String), Never>) in
                Self.authenticate { continuation.resume(returning: ($0, $1)) }
            }
        }
        #expect(outcome.0 == false)
        #expect(outcome.1 == "Biometry is not available on this device.")
        await world.close()
    }

    @Test func appleStyleCallbackEvaluationSucceedsWithAMatchingFinger() async throws {
        let world = try LocalAuthenticationWorld()
        try await world.enroll("alice-1")
        let presenter = ScriptedAuthenticationPresenter()
        let context = makeContext(in: world, presenter: presenter)
        async let outcome = withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            var error: NSError?
            guard context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error) else {
                return continuation.resume(returning: false)
            }
            #expect(context.biometryType == .touchID)
            context.evaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, localizedReason: "Log in") { success, _ in
                continuation.resume(returning: success)
            }
        }
        #expect(await waitUntil { !presenter.shownPrompts.isEmpty }, "the evaluation asks for a finger")
        try await world.scan("alice-1")
        #expect(await outcome)
        await world.close()
    }

    @Test func catchingByCodeWorksAsOnApplePlatforms() async throws {
        let world = try LocalAuthenticationWorld()
        let context = makeContext(in: world)
        context.interactionNotAllowed = true
        do {
            _ = try await context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "unlock")
            Issue.record("evaluated without interaction")
        } catch LAError.notInteractive {
        } catch {
            Issue.record("unexpected \(error)")
        }
        await world.close()
    }
}

@Suite("LAError and the enums keep Apple's shapes")
struct LAErrorShapeTests {
    @Test func rawValuesDomainAndAliasesAreApples() {
        #expect(LAErrorDomain == "com.apple.LocalAuthentication")
        #expect(LAError.errorDomain == LAErrorDomain)
        let pairs: [(LAError.Code, Int)] = [
            (.authenticationFailed, -1), (.userCancel, -2), (.userFallback, -3), (.systemCancel, -4),
            (.passcodeNotSet, -5), (.biometryNotAvailable, -6), (.biometryNotEnrolled, -7), (.biometryLockout, -8),
            (.appCancel, -9), (.invalidContext, -10), (.companionNotAvailable, -11), (.watchNotAvailable, -11),
            (.biometryNotPaired, -12), (.biometryDisconnected, -13), (.invalidDimensions, -14),
            (.notInteractive, -1004),
        ]
        for (code, raw) in pairs { #expect(code.rawValue == raw) }
        #expect(LAError.Code.biometryNotAvailable == .touchIDNotAvailable)
        #expect(LAError.biometryLockout == LAError.Code.touchIDLockout)
        let error = LAError(.userCancel) as NSError
        #expect(error.domain == LAErrorDomain)
        #expect(error.code == -2)
        #expect(LAError(.userCancel) == LAError(.userCancel, userInfo: [NSLocalizedDescriptionKey: "other text"]))
        #expect(LAPolicy.deviceOwnerAuthenticationWithWatch == .deviceOwnerAuthenticationWithCompanion)
        #expect(LAPolicy.deviceOwnerAuthenticationWithBiometricsOrWatch.rawValue == 4)
        #expect(LAPolicy.deviceOwnerAuthenticationWithWristDetection.rawValue == 5)
        #expect(LABiometryType.touchID.rawValue == 1 && LABiometryType.opticID.rawValue == 4)
        #expect(LACredentialType.smartCardPIN.rawValue == -3)
        #expect(LAAccessControlOperation.useKeyKeyExchange.rawValue == 5)
        #expect(LATouchIDAuthenticationMaximumAllowableReuseDuration == 300)
    }

    /// LAPublicDefines.h's macros, as wrappers compare codes with them:
    /// `if (error as NSError).code == Int(kLAErrorUserCancel)`.
    @Test func publicDefinesMacrosMatchTheEnums() {
        let pairs: [(Int32, LAError.Code)] = [
            (kLAErrorAuthenticationFailed, .authenticationFailed), (kLAErrorUserCancel, .userCancel),
            (kLAErrorUserFallback, .userFallback), (kLAErrorSystemCancel, .systemCancel),
            (kLAErrorPasscodeNotSet, .passcodeNotSet), (kLAErrorTouchIDNotAvailable, .touchIDNotAvailable),
            (kLAErrorBiometryNotAvailable, .biometryNotAvailable), (kLAErrorTouchIDNotEnrolled, .touchIDNotEnrolled),
            (kLAErrorBiometryNotEnrolled, .biometryNotEnrolled), (kLAErrorTouchIDLockout, .touchIDLockout),
            (kLAErrorBiometryLockout, .biometryLockout), (kLAErrorAppCancel, .appCancel),
            (kLAErrorInvalidContext, .invalidContext), (kLAErrorWatchNotAvailable, .watchNotAvailable),
            (kLAErrorCompanionNotAvailable, .companionNotAvailable), (kLAErrorBiometryNotPaired, .biometryNotPaired),
            (kLAErrorBiometryDisconnected, .biometryDisconnected), (kLAErrorInvalidDimensions, .invalidDimensions),
            (kLAErrorNotInteractive, .notInteractive),
        ]
        for (macro, code) in pairs { #expect(Int(macro) == code.rawValue) }
        #expect((LAError(.userCancel) as NSError).code == Int(kLAErrorUserCancel))
        #expect(kLAErrorDomain == LAErrorDomain)
        #expect(LAPolicy(rawValue: Int(kLAPolicyDeviceOwnerAuthentication)) == .deviceOwnerAuthentication)
        #expect(Int(kLABiometryTypeTouchID) == LABiometryType.touchID.rawValue)
        #expect(Int(kLACredentialTypeApplicationPassword) == LACredentialType.applicationPassword.rawValue)
    }
}

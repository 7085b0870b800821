import Foundation
import KeychainServices

/// The authentication a right asks for (`LAAuthenticationRequirement`).
///
/// Each requirement maps to an access-control list the engine checks: ``default`` is `.userPresence` (a
/// fingerprint or the passcode), ``biometry`` is `.biometryAny`, ``biometryCurrentSet`` is `.biometryCurrentSet`
/// and ``biometry(fallback:)`` with ``LABiometryFallbackRequirement/devicePasscode`` is
/// `.biometryAny` or `.devicePasscode`.
public class LAAuthenticationRequirement: NSObject, @unchecked Sendable {
    // Safe to share: `kind` is immutable after init.
    package enum Kind: String, Sendable, Codable {
        case userPresence
        case biometry
        case biometryCurrentSet
        case biometryOrPasscode
    }

    package let kind: Kind

    package required init(kind: Kind) {
        self.kind = kind
        super.init()
    }

    /// The default requirement: a fingerprint or the device passcode.
    public override convenience init() { self.init(kind: .userPresence) }

    /// A fingerprint or the device passcode (Apple: "Face ID, Touch ID, Apple Watch, or the device passcode").
    public class var `default`: LAAuthenticationRequirement { LAAuthenticationRequirement(kind: .userPresence) }

    /// A fingerprint; fails when there is no reader or no enrolled finger.
    public class var biometry: LAAuthenticationRequirement { LAAuthenticationRequirement(kind: .biometry) }

    /// A fingerprint from the set enrolled when the right was saved; once enrollment changes, a persisted right
    /// with this requirement can no longer be authorized.
    public class var biometryCurrentSet: LAAuthenticationRequirement {
        LAAuthenticationRequirement(kind: .biometryCurrentSet)
    }

    /// A fingerprint, falling back as `fallback` says.
    public class func biometry(fallback: LABiometryFallbackRequirement) -> Self {
        Self(kind: fallback.allowsPasscode ? .biometryOrPasscode : .biometry)
    }

    /// The access-control flags this requirement stands for.
    package var flags: SecAccessControlCreateFlags {
        switch kind {
        case .userPresence: return .userPresence
        case .biometry: return .biometryAny
        case .biometryCurrentSet: return .biometryCurrentSet
        case .biometryOrPasscode: return [.biometryAny, .or, .devicePasscode]
        }
    }

    /// This requirement as an access-control list, optionally for an enclave key's private-key use.
    package func accessControl(forKey: Bool = false) throws -> SecAccessControl {
        var flags = self.flags
        if forKey { flags.insert(.privateKeyUsage) }
        guard
            let control = SecAccessControlCreateWithFlags(
                nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, flags, nil)
        else { throw LAError(.invalidContext, "the requirement cannot be expressed as an access control") }
        return control
    }
}

/// What a biometric requirement falls back to (`LABiometryFallbackRequirement`).
public class LABiometryFallbackRequirement: NSObject, @unchecked Sendable {
    // Safe to share: `allowsPasscode` is immutable after init.
    package let allowsPasscode: Bool

    package init(allowsPasscode: Bool) {
        self.allowsPasscode = allowsPasscode
        super.init()
    }

    /// No fallback beyond what the biometric requirement itself allows.
    public override convenience init() { self.init(allowsPasscode: false) }

    /// The default fallback: none (the right needs a fingerprint).
    public class var `default`: LABiometryFallbackRequirement { LABiometryFallbackRequirement(allowsPasscode: false) }

    /// Fall back to the device passcode (the user's password, checked through PAM).
    public class var devicePasscode: LABiometryFallbackRequirement {
        LABiometryFallbackRequirement(allowsPasscode: true)
    }
}

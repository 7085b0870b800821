import Foundation
import SecurityProtocol

/// What an access-control list demands for one operation, read from its `SecAccessControlCreateFlags` bits.
package struct AccessRequirement: Sendable, Equatable {
    /// One authentication constraint.
    package enum Constraint: Sendable, Equatable {
        /// Biometry or passcode.
        case userPresence
        /// Any enrolled finger.
        case biometryAny
        /// A finger of the set enrolled when the list was bound (`bound`; nil = the set enrolled now).
        case biometryCurrentSet(bound: Data?)
        /// The passcode.
        case devicePasscode
        /// A companion device; never satisfiable on Linux.
        case companion
    }

    /// The flags' raw bits (Apple's values).
    package enum Flag {
        static let userPresence: UInt64 = 1 << 0
        static let biometryAny: UInt64 = 1 << 1
        static let biometryCurrentSet: UInt64 = 1 << 3
        static let devicePasscode: UInt64 = 1 << 4
        static let companion: UInt64 = 1 << 5
        static let or: UInt64 = 1 << 14
        static let and: UInt64 = 1 << 15
        static let privateKeyUsage: UInt64 = 1 << 30
        static let applicationPassword: UInt64 = 1 << 31
    }

    /// The constraints; empty = none.
    package var constraints: [Constraint]
    /// Whether every constraint must hold (`.and`, or several constraints without `.or`); else one suffices.
    package var requiresAll: Bool
    /// Whether the context's application password is needed (`.applicationPassword`).
    package var needsApplicationPassword: Bool

    /// What `policy` demands for `operation`. With `.privateKeyUsage` the constraints guard only private-key
    /// operations (sign, decrypt, key exchange); reading the key item's attributes needs nothing.
    package init(_ policy: AccessControlPolicy, operation: AccessControlOperation) {
        let flags = policy.flags
        needsApplicationPassword = flags & Flag.applicationPassword != 0
        let keyOperation = [.useKeySign, .useKeyDecrypt, .useKeyKeyExchange].contains(operation)
        var constraints: [Constraint] = []
        if flags & Flag.privateKeyUsage == 0 || keyOperation {
            if flags & Flag.userPresence != 0 { constraints.append(.userPresence) }
            if flags & Flag.biometryAny != 0 { constraints.append(.biometryAny) }
            if flags & Flag.biometryCurrentSet != 0 {
                constraints.append(.biometryCurrentSet(bound: policy.boundStateHash))
            }
            if flags & Flag.devicePasscode != 0 { constraints.append(.devicePasscode) }
            if flags & Flag.companion != 0 { constraints.append(.companion) }
        }
        self.constraints = constraints
        requiresAll = flags & Flag.or == 0
    }

    /// Whether the policy's flags name `.biometryCurrentSet` (its hash is bound when the item is created).
    package static func bindsEnrolledSet(_ policy: AccessControlPolicy) -> Bool {
        policy.flags & Flag.biometryCurrentSet != 0
    }

    /// Whether the policy's flags name `.privateKeyUsage`.
    package static func usesPrivateKey(_ policy: AccessControlPolicy) -> Bool {
        policy.flags & Flag.privateKeyUsage != 0
    }

    /// Whether the policy's flags name `.applicationPassword`.
    package static func needsApplicationPassword(_ policy: AccessControlPolicy) -> Bool {
        policy.flags & Flag.applicationPassword != 0
    }

    /// Whether any constraint compares against the enrolled set (`biometryCurrentSet`); only then does a check need
    /// the current state hash.
    package var dependsOnEnrolledSet: Bool {
        constraints.contains { if case .biometryCurrentSet = $0 { true } else { false } }
    }

    /// Whether `credentials` meet the constraints, the enrolled set being `currentHash` now. A credential taken from
    /// the reuse window never counts: Apple's reuse applies to device unlock, not to keychain item or key access.
    package func isSatisfied(by credentials: [Credential], currentHash: Data?) -> Bool {
        guard !constraints.isEmpty else { return true }
        let met = constraints.map { Self.isMet($0, credentials, currentHash) }
        return requiresAll ? met.allSatisfy { $0 } : met.contains(true)
    }

    /// The constraints that `credentials` do not meet.
    package func unmet(by credentials: [Credential], currentHash: Data?) -> [Constraint] {
        constraints.filter { !Self.isMet($0, credentials, currentHash) }
    }

    /// Whether some authentication could still meet the constraints; false once a `.biometryCurrentSet` list's
    /// enrolled set has changed (for good) or only a companion would do.
    package func isSatisfiable(currentHash: Data?) -> Bool {
        guard !constraints.isEmpty else { return true }
        let possible = constraints.map { Self.isPossible($0, currentHash) }
        return requiresAll ? possible.allSatisfy { $0 } : possible.contains(true)
    }

    private static func isPossible(_ constraint: Constraint, _ currentHash: Data?) -> Bool {
        switch constraint {
        case .companion: false
        case .biometryCurrentSet(let bound?): currentHash != nil && bound == currentHash
        default: true
        }
    }

    private static func isMet(_ constraint: Constraint, _ credentials: [Credential], _ currentHash: Data?) -> Bool {
        let credentials = credentials.filter { !$0.isReused }
        return switch constraint {
        case .userPresence: !credentials.isEmpty
        case .biometryAny: credentials.contains { $0.method == .biometry }
        case .biometryCurrentSet(let bound):
            currentHash != nil && (bound ?? currentHash) == currentHash
                && credentials.contains { $0.method == .biometry && $0.enrolledSetHash == currentHash }
        case .devicePasscode: credentials.contains { $0.method == .passcode }
        case .companion: false
        }
    }

    /// The evaluations that would meet the unmet constraints, in order.
    func evaluations(for unmet: [Constraint]) -> [EvaluationPolicy] {
        let biometric = unmet.contains {
            if case .biometryAny = $0 { true } else if case .biometryCurrentSet = $0 { true } else { false }
        }
        let presence = unmet.contains(.userPresence)
        let passcode = unmet.contains(.devicePasscode)
        if requiresAll {
            var steps: [EvaluationPolicy] = []
            if biometric { steps.append(.biometrics) }
            if passcode { steps.append(.passcode) }
            if presence && steps.isEmpty { steps.append(.deviceOwner) }
            return steps
        }
        if presence || (biometric && passcode) { return [.deviceOwner] }
        if biometric { return [.biometrics] }
        if passcode { return [.passcode] }
        return []
    }
}

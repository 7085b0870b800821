import Foundation

/// The authentication state of the device (`LADomainState`): the enrolled biometry and companions.
public final class LADomainState: Sendable {
    /// The biometric part.
    public let biometry: LADomainStateBiometry
    /// The companion part (always empty on Linux).
    public let companion: LADomainStateCompanion

    init(biometry: LADomainStateBiometry) {
        self.biometry = biometry
        self.companion = LADomainStateCompanion()
    }

    /// A hash over every part; equal to ``LADomainStateBiometry/stateHash`` on Linux, where no companion exists.
    public var stateHash: Data? { biometry.stateHash }
}

/// The biometric part of the domain state (`LADomainStateBiometry`).
public final class LADomainStateBiometry: Sendable {
    /// ``LABiometryType/touchID`` when a fingerprint reader is present, else ``LABiometryType/none``.
    public let biometryType: LABiometryType
    /// A hash of the enrolled fingerprints: SHA-256 over a per-install salt and the prints' random identifiers.
    /// Nil when nothing is enrolled; it changes whenever a finger is enrolled or removed.
    public let stateHash: Data?

    init(biometryType: LABiometryType, stateHash: Data?) {
        self.biometryType = biometryType
        self.stateHash = stateHash
    }
}

/// The companion part of the domain state (`LADomainStateCompanion`); always empty on Linux.
public final class LADomainStateCompanion: Sendable {
    /// The companion kinds available: none on Linux.
    public let availableCompanionTypes: Set<LACompanionType> = []
    /// Nil: no companion is paired.
    public let stateHash: Data? = nil

    init() {}

    /// The state hash of one companion kind: nil on Linux.
    public func stateHash(for companionType: LACompanionType) -> Data? { nil }
}

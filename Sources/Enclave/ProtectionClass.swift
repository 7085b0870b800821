import SecureCrypto

/// A data-protection class for keychain items, named by its `kSecAttrAccessible` string value.
package enum ProtectionClass: String, CaseIterable, Sendable {
    /// `kSecAttrAccessibleWhenUnlocked`: only while unlocked (the default).
    case whenUnlocked = "ak"
    /// `kSecAttrAccessibleAfterFirstUnlock`: after the first unlock since boot.
    case afterFirstUnlock = "ck"
    /// `kSecAttrAccessibleAlways` (deprecated by Apple): always.
    case always = "dk"
    /// `kSecAttrAccessibleWhenUnlockedThisDeviceOnly`.
    case whenUnlockedThisDeviceOnly = "aku"
    /// `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`.
    case afterFirstUnlockThisDeviceOnly = "cku"
    /// `kSecAttrAccessibleAlwaysThisDeviceOnly` (deprecated by Apple).
    case alwaysThisDeviceOnly = "dku"
    /// `kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly`: only while unlocked, only while a passcode is set.
    case whenPasscodeSetThisDeviceOnly = "akpu"

    /// The class whose raw value is `bytes` (UTF-8), nil for any other bytes: how a row's clear column is read on
    /// the hot path, without making a string of it first.
    package init?(utf8 bytes: RawSpan) {
        guard let match = Self.everyCase.first(where: { $0.rawValue.utf8Equals(bytes) }) else { return nil }
        self = match
    }

    /// `allCases`, made once (the synthesized property builds a new array on every call).
    private static let everyCase = allCases

    /// Hashed by case, not through its raw string (a raw-valued enum's default): the enclave looks its keys up by
    /// class on every use.
    package func hash(into hasher: inout Hasher) {
        let position: UInt8 =
            switch self {
            case .whenUnlocked: 0
            case .afterFirstUnlock: 1
            case .always: 2
            case .whenUnlockedThisDeviceOnly: 3
            case .afterFirstUnlockThisDeviceOnly: 4
            case .alwaysThisDeviceOnly: 5
            case .whenPasscodeSetThisDeviceOnly: 6
            }
        hasher.combine(position)
    }

    /// Items of this class never leave the device (no backup export, never synchronizable).
    package var isThisDeviceOnly: Bool {
        switch self {
        case .whenUnlocked, .afterFirstUnlock, .always: false
        default: true
        }
    }

    /// What the keybag must have reached for this class key to be in memory.
    package var availability: Availability {
        switch self {
        case .whenUnlocked, .whenUnlockedThisDeviceOnly, .whenPasscodeSetThisDeviceOnly: .unlocked
        case .afterFirstUnlock, .afterFirstUnlockThisDeviceOnly: .afterFirstUnlock
        case .always, .alwaysThisDeviceOnly: .always
        }
    }

    /// When a class key may be used.
    package enum Availability: Sendable {
        case unlocked, afterFirstUnlock, always
    }
}

import Foundation
import KeychainStore

/// The attributes each item class accepts, their types, primary keys and defaults (`reference/apple-api.md` §2.2).
package enum AttributeSchema {
    /// The type an attribute's value must have.
    package enum Kind: Sendable {
        /// A string.
        case string
        /// Bytes; a string is accepted and stored as its UTF-8 bytes.
        case blob
        /// An integer.
        case number
        /// A boolean (`Bool`, or an `NSNumber` 0/1).
        case bool
        /// A date (read-only: set by the engine).
        case date
        /// A `SecAccessControl`.
        case accessControl
        /// A `kSecAttrAccessible…` value.
        case protection
        /// A number Apple spells as a decimal string constant (`kSecAttrKeyClassPrivate` = `"1"`); stored as the
        /// string, accepted as either.
        case numericString
    }

    private static let common: [String: Kind] = [
        "accc": .accessControl, "agrp": .string, "pdmn": .protection, "sync": .bool, "cdat": .date, "mdat": .date,
        "labl": .string,
    ]
    private static let password: [String: Kind] = [
        "desc": .string, "icmt": .string, "crtr": .number, "type": .number, "invi": .bool, "nega": .bool,
        "acct": .string,
    ]
    private static let genericPassword = common.merging(password) { a, _ in a }.merging([
        "svce": .string, "gena": .blob,
    ]) { a, _ in a }
    private static let internetPassword = common.merging(password) { a, _ in a }.merging([
        "sdmn": .string, "srvr": .string, "ptcl": .string, "atyp": .string, "port": .number, "path": .string,
    ]) { a, _ in a }
    private static let certificate = common.merging([
        "ctyp": .number, "cenc": .number, "subj": .blob, "issr": .blob, "slnr": .blob, "skid": .blob, "pkhh": .blob,
    ]) { a, _ in a }
    private static let key = common.merging([
        "kcls": .numericString, "klbl": .blob, "perm": .bool, "atag": .blob, "type": .numericString, "bsiz": .number,
        "esiz": .number, "encr": .bool, "decr": .bool, "drve": .bool, "sign": .bool, "vrfy": .bool, "wrap": .bool,
        "unwp": .bool, "tkid": .string, "crtr": .number,
    ]) { a, _ in a }

    /// The attributes `itemClass` accepts, by `kSecAttr…` string value.
    package static func attributes(of itemClass: ItemClass) -> [String: Kind] {
        switch itemClass {
        case .genericPassword: genericPassword
        case .internetPassword: internetPassword
        case .certificate: certificate
        case .key: key
        case .identity: certificate.merging(key) { a, _ in a }
        }
    }

    /// The attributes that, with the access group and synchronizable, make an item unique (in this order).
    package static func primaryKey(of itemClass: ItemClass) -> [String] {
        switch itemClass {
        case .genericPassword: ["acct", "svce"]
        case .internetPassword: ["acct", "sdmn", "srvr", "ptcl", "atyp", "port", "path"]
        case .certificate, .identity: ["ctyp", "issr", "slnr"]
        case .key: ["kcls", "klbl", "atag", "type", "bsiz", "esiz"]
        }
    }

    /// The value an omitted primary-key attribute takes: empty or zero.
    package static func defaultValue(for kind: Kind) -> KeychainValue {
        switch kind {
        case .string, .protection: .string("")
        case .blob: .data(Data())
        case .number: .integer(0)
        case .bool: .bool(false)
        case .date: .date(Date(timeIntervalSinceReferenceDate: 0))
        case .numericString: .string("0")
        case .accessControl: .accessControl(AccessControlPolicy(protection: "", flags: 0))
        }
    }

    /// `value` converted to `kind`, or nil when it is the wrong type.
    package static func normalize(_ value: KeychainValue, as kind: Kind) -> KeychainValue? {
        switch (kind, value) {
        case (.string, .string), (.protection, .string), (.blob, .data), (.date, .date),
            (.accessControl, .accessControl):
            return value
        case (.blob, .string(let s)): return .data(Data(s.utf8))
        case (.number, .integer): return value
        case (.bool, _): return value.boolValue.map(KeychainValue.bool)
        case (.numericString, .string(let s)): return Int64(s) != nil ? value : nil
        case (.numericString, .integer(let i)): return .string(String(i))
        default: return nil
        }
    }
}

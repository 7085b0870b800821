import Foundation
import SecurityProtocol

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
        /// A trusted-application list (`SecAccess`).
        case access
        /// A `kSecAttrAccessible…` value.
        case protection
        /// A number Apple spells as a decimal string constant (`kSecAttrKeyClassPrivate` = `"1"`); stored as the
        /// string, accepted as either.
        case numericString
        /// Apple's "Blob" attributes (`kSecAttrAccount`, `kSecAttrService`, `kSecAttrLabel`…, securityd's
        /// SecItemSchema.c): a string or bytes, stored and returned in the type given (securityd's `copyBlob`
        /// keeps a CFString or CFData as it is), matched by their bytes either way.
        case stringOrData
        /// A number that may also be given as a string (`kSecAttrCreator` / `kSecAttrType` as `"aapl"`): stored and
        /// returned as given.
        case numberOrString
    }

    private static let common: [String: Kind] = [
        "accc": .accessControl, "acls": .access, "agrp": .string, "pdmn": .protection, "sync": .bool, "cdat": .date,
        "mdat": .date,
        "labl": .stringOrData,
    ]
    private static let password: [String: Kind] = [
        "desc": .stringOrData, "icmt": .stringOrData, "crtr": .numberOrString, "type": .numberOrString,
        "invi": .bool, "nega": .bool, "acct": .stringOrData,
    ]
    private static let genericPassword = common.merging(password) { a, _ in a }.merging([
        "svce": .stringOrData, "gena": .stringOrData,
    ]) { a, _ in a }
    private static let internetPassword = common.merging(password) { a, _ in a }.merging([
        "sdmn": .stringOrData, "srvr": .stringOrData, "ptcl": .string, "atyp": .stringOrData, "port": .number,
        "path": .stringOrData,
    ]) { a, _ in a }
    private static let certificate = common.merging([
        "ctyp": .number, "cenc": .number, "subj": .blob, "issr": .blob, "slnr": .blob, "skid": .blob, "pkhh": .blob,
    ]) { a, _ in a }
    private static let key = common.merging([
        "kcls": .numericString, "klbl": .blob, "perm": .bool, "atag": .blob, "type": .numericString, "bsiz": .number,
        "esiz": .number, "encr": .bool, "decr": .bool, "drve": .bool, "sign": .bool, "vrfy": .bool, "wrap": .bool,
        "unwp": .bool, "tkid": .string, "crtr": .numberOrString,
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
    package static func primaryKey(of itemClass: ItemClass) -> [String] { primaryKeys[position(itemClass)].names }

    /// The kinds of `itemClass`'s primary-key attributes, in the primary key's order.
    package static func primaryKeyKinds(of itemClass: ItemClass) -> [Kind] { primaryKeys[position(itemClass)].kinds }

    /// Each class's primary key and its attributes' kinds, made once: a lookup asks for them on every request.
    private static let primaryKeys: [(names: [String], kinds: [Kind])] = [
        (["acct", "svce"], genericPassword),
        (["acct", "sdmn", "srvr", "ptcl", "atyp", "port", "path"], internetPassword),
        (["ctyp", "issr", "slnr"], certificate), (["kcls", "klbl", "atag", "type", "bsiz", "esiz"], key),
    ].map { names, schema in (names, names.map { schema[$0]! }) }

    /// Where `itemClass`'s entry is in ``primaryKeys`` (an identity's is its certificate's).
    private static func position(_ itemClass: ItemClass) -> Int {
        switch itemClass {
        case .genericPassword: 0
        case .internetPassword: 1
        case .certificate, .identity: 2
        case .key: 3
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
        case .stringOrData: .string("")
        case .numberOrString: .integer(0)
        case .accessControl: .accessControl(AccessControlPolicy(protection: "", flags: 0))
        case .access: .access(ItemAccess(descriptor: "", applications: []))
        }
    }

    /// `value` converted to `kind`, or nil when it is the wrong type.
    package static func normalize(_ value: KeychainValue, as kind: Kind) -> KeychainValue? {
        switch (kind, value) {
        case (.string, .string), (.protection, .string), (.blob, .data), (.date, .date),
            (.accessControl, .accessControl), (.access, .access):
            return value
        case (.blob, .string(let s)): return .data(Data(s.utf8))
        case (.number, .integer): return value
        case (.bool, _): return value.boolValue.map(KeychainValue.bool)
        case (.numericString, .string(let s)): return Int64(s) != nil ? value : nil
        case (.numericString, .integer(let i)): return .string(String(i))
        case (.stringOrData, .string), (.stringOrData, .data), (.numberOrString, .integer), (.numberOrString, .string):
            return value
        default: return nil
        }
    }

    /// Whether a stored value matches a query's: equal values, or a string and bytes with the same UTF-8 bytes
    /// (a `kSecAttrAccount` added as `Data` is found by the same account as a `String`, and the reverse).
    package static func matches(_ stored: KeychainValue, _ wanted: KeychainValue) -> Bool {
        switch (stored, wanted) {
        case (.string(let text), .data(let bytes)), (.data(let bytes), .string(let text)): Data(text.utf8) == bytes
        default: stored == wanted
        }
    }

    /// The form a value takes in the blind index: bytes that are valid UTF-8 count as that string, so a string
    /// and its bytes name the same item (and rows indexed before bytes were accepted keep their index).
    package static func indexForm(_ value: KeychainValue) -> KeychainValue {
        if case .data(let bytes) = value, let text = String(validating: bytes, as: UTF8.self) { return .string(text) }
        return value
    }
}

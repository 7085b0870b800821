/// CTAP1/U2F's wire (FIDO U2F Raw Message Formats, CTAP 2.1 §11.2.9.1.1 `CTAPHID_MSG`): ISO 7816-4 command APDUs,
/// short or extended, and the status words a U2F authenticator answers with.
package enum U2F {
    /// The instructions U2F defines.
    package enum Instruction: UInt8, Sendable {
        case register = 0x01
        case authenticate = 0x02
        case version = 0x03
    }

    /// `authenticate`'s control byte (P1).
    package enum Control: UInt8, Sendable {
        /// Only whether the key handle is this authenticator's, for this application: never signs.
        case checkOnly = 0x07
        case enforceUserPresenceAndSign = 0x03
        case dontEnforceUserPresenceAndSign = 0x08
    }

    /// The status words (SW1 SW2) U2F uses.
    package enum StatusWord: UInt16, Error, Sendable {
        case noError = 0x9000
        /// The user's presence is needed: the client asks again until it is given.
        case conditionsNotSatisfied = 0x6985
        /// A key handle that is not this authenticator's, or not for this application.
        case wrongData = 0x6A80
        case wrongLength = 0x6700
        case classNotSupported = 0x6E00
        case instructionNotSupported = 0x6D00
        /// No precise diagnosis: the keychain failed.
        case unknown = 0x6F00

        /// The two bytes that end a response.
        package var bytes: [UInt8] { [UInt8(rawValue >> 8), UInt8(rawValue & 0xFF)] }
    }

    /// A command APDU: CLA, INS, P1, P2 and the data, from either encoding.
    package struct Command: Equatable, Sendable {
        package var cla: UInt8
        package var ins: UInt8
        package var p1: UInt8
        package var p2: UInt8
        package var data: [UInt8]

        package init(cla: UInt8 = 0, ins: UInt8, p1: UInt8 = 0, p2: UInt8 = 0, data: [UInt8] = []) {
            (self.cla, self.ins, self.p1, self.p2, self.data) = (cla, ins, p1, p2, data)
        }

        /// Parses `bytes` as a short APDU (`Lc` of one byte, `Le` of one) or an extended one (a zero byte, then
        /// `Lc` of two bytes, `Le` of two), with or without data and `Le`.
        ///
        /// - Throws: ``StatusWord/wrongLength`` when the lengths do not add up.
        package init(_ bytes: [UInt8]) throws(StatusWord) {
            guard bytes.count >= 4 else { throw .wrongLength }
            (cla, ins, p1, p2) = (bytes[0], bytes[1], bytes[2], bytes[3])
            let body = Array(bytes.dropFirst(4))
            switch body.count {
            case 0, 1:  // no data; perhaps a short Le
                data = []
            case 3 where body[0] == 0:  // no data; an extended Le
                data = []
            default:
                if body[0] == 0 {
                    // Extended: 00 Lc1 Lc2 data [Le1 Le2]
                    guard body.count > 3 else { throw .wrongLength }
                    let length = Int(body[1]) << 8 | Int(body[2])
                    // A length of zero with an Le after it is what python-fido2 sends for VERSION: taken as no data.
                    guard body.count == 3 + length || body.count == 5 + length else { throw .wrongLength }
                    data = Array(body[3..<(3 + length)])
                } else {
                    // Short: Lc data [Le]
                    let length = Int(body[0])
                    guard body.count == 1 + length || body.count == 2 + length else { throw .wrongLength }
                    data = Array(body[1..<(1 + length)])
                }
            }
        }

        /// The extended encoding, with `Le` 0 (as much as the response holds), as python-fido2 and browsers send.
        package var encoded: [UInt8] {
            [cla, ins, p1, p2, 0, UInt8(data.count >> 8), UInt8(data.count & 0xFF)] + data + [0, 0]
        }
    }
}

import Foundation

extension Data {
    /// Bytes from a hex string; test data only.
    package init(hex: String) {
        var bytes = [UInt8]()
        bytes.reserveCapacity(hex.utf8.count / 2)
        var iterator = hex.utf8.makeIterator()
        func nibble(_ c: UInt8) -> UInt8 {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: preconditionFailure("not hex: \(hex)")
            }
        }
        while let high = iterator.next() {
            let low = iterator.next()!
            bytes.append(nibble(high) << 4 | nibble(low))
        }
        self.init(bytes)
    }

    package var hex: String { map { String(format: "%02x", $0) }.joined() }
}

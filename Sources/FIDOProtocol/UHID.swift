/// Linux's `/dev/uhid` events (`<linux/uhid.h>`), as far as a FIDO security key made in user space needs them: one
/// `struct uhid_event` per read or write, packed, in the machine's byte order (little-endian on every machine
/// Swift on Linux runs on). `UHIDTests` checks these offsets against the kernel header itself.
package enum UHID {
    /// `sizeof(struct uhid_event)`: the type, then the union of the requests, as long as the largest
    /// (`struct uhid_create2_req`) rounded up to 8 bytes (the union holds a `__u64`, `uhid_start_req`'s flags).
    package static let eventSize = 4 + (createSize + 7) / 8 * 8
    /// `sizeof(struct uhid_create2_req)`: name, phys, uniq, rd_size, bus, vendor, product, version, country, rd_data.
    static let createSize = 128 + 64 + 64 + 2 + 2 + 4 + 4 + 4 + 4 + descriptorMaximum
    /// `HID_MAX_DESCRIPTOR_SIZE` and `UHID_DATA_MAX`.
    static let descriptorMaximum = 4096
    static let dataMaximum = 4096
    /// `BUS_USB`: browsers list security keys on any bus, and users recognize this one.
    static let busUSB: UInt16 = 0x03

    /// `enum uhid_event_type`, the types used here.
    package enum EventType: UInt32, Sendable {
        case destroy = 1, start, stop, open, close, output
        case getReport = 9, getReportReply, create2, input2, setReport, setReportReply
    }

    /// What the kernel says (a read from `/dev/uhid`).
    package enum Event: Equatable, Sendable {
        /// A report the host wrote (hidraw's write): 64 bytes of CTAPHID.
        case output([UInt8])
        /// A feature report asked for or set (`HIDIOCGFEATURE`, `HIDIOCSFEATURE`): answered with an error.
        case getReport(id: UInt32)
        case setReport(id: UInt32)
        /// Anything else (start, stop, open, close): nothing to do.
        case other(type: UInt32)
    }

    /// The FIDO HID report descriptor (CTAP 2.1 §11.2.8.1): usage page 0xF1D0, usage 0x01, 64-byte input and output
    /// reports without report IDs. Browsers and udev's `fido_id` find security keys by it.
    package static let fidoReportDescriptor: [UInt8] = [
        0x06, 0xD0, 0xF1,  // Usage Page (FIDO Alliance)
        0x09, 0x01,  // Usage (CTAPHID)
        0xA1, 0x01,  // Collection (Application)
        0x09, 0x20,  //   Usage (Input Report Data)
        0x15, 0x00, 0x26, 0xFF, 0x00,  //   Logical Minimum (0), Logical Maximum (255)
        0x75, 0x08, 0x95, 0x40,  //   Report Size (8), Report Count (64)
        0x81, 0x02,  //   Input (Data, Variable, Absolute)
        0x09, 0x21,  //   Usage (Output Report Data)
        0x15, 0x00, 0x26, 0xFF, 0x00,  //   Logical Minimum (0), Logical Maximum (255)
        0x75, 0x08, 0x95, 0x40,  //   Report Size (8), Report Count (64)
        0x91, 0x02,  //   Output (Data, Variable, Absolute)
        0xC0,  // End Collection
    ]

    /// `UHID_CREATE2`: a device named `name` with `descriptor`, on the USB bus, as `vendor`:`product`.
    package static func create(name: String, vendor: UInt32, product: UInt32, descriptor: [UInt8]) -> [UInt8] {
        var event = header(.create2)
        event.replaceSubrange(4..<(4 + min(name.utf8.count, 127)), with: name.utf8.prefix(127))
        var offset = 4 + 128 + 64 + 64
        put(UInt16(descriptor.count), at: &offset, in: &event)
        put(busUSB, at: &offset, in: &event)
        put(vendor, at: &offset, in: &event)
        put(product, at: &offset, in: &event)
        put(UInt32(0), at: &offset, in: &event)  // version
        put(UInt32(0), at: &offset, in: &event)  // country
        event.replaceSubrange(offset..<(offset + descriptor.count), with: descriptor)
        return event
    }

    /// `UHID_INPUT2`: a report for the host (what hidraw's reader gets).
    package static func input(_ report: [UInt8]) -> [UInt8] {
        var event = header(.input2)
        var offset = 4
        put(UInt16(report.count), at: &offset, in: &event)
        event.replaceSubrange(offset..<(offset + report.count), with: report)
        return event
    }

    /// `UHID_GET_REPORT_REPLY` or `UHID_SET_REPORT_REPLY` for request `id`, with errno `error` (this device has no
    /// feature reports).
    package static func reply(to event: Event, error: UInt16) -> [UInt8]? {
        let (type, id): (EventType, UInt32)
        switch event {
        case .getReport(let number): (type, id) = (.getReportReply, number)
        case .setReport(let number): (type, id) = (.setReportReply, number)
        case .output, .other: return nil
        }
        var reply = header(type)
        var offset = 4
        put(id, at: &offset, in: &reply)
        put(error, at: &offset, in: &reply)
        return reply
    }

    /// `UHID_DESTROY`.
    package static func destroy() -> [UInt8] { header(.destroy) }

    /// Reads one event; nil for fewer bytes than its type needs.
    package static func parse(_ bytes: [UInt8]) -> Event? {
        guard bytes.count >= 4 else { return nil }
        let type = read(UInt32.self, bytes, at: 0)
        switch EventType(rawValue: type) {
        case .output:
            // struct uhid_output_req: data[4096], size, rtype. A report without an ID may come with a leading 0.
            guard bytes.count >= 4 + dataMaximum + 3 else { return nil }
            let size = Int(read(UInt16.self, bytes, at: 4 + dataMaximum))
            guard size <= dataMaximum else { return nil }
            var data = Array(bytes[4..<(4 + size)])
            if data.count == 65, data.first == 0 { data.removeFirst() }
            return .output(data)
        case .getReport, .setReport:
            guard bytes.count >= 8 else { return nil }
            let id = read(UInt32.self, bytes, at: 4)
            return type == EventType.getReport.rawValue ? .getReport(id: id) : .setReport(id: id)
        default:
            return .other(type: type)
        }
    }

    private static func header(_ type: EventType) -> [UInt8] {
        var event = [UInt8](repeating: 0, count: eventSize)
        var offset = 0
        put(type.rawValue, at: &offset, in: &event)
        return event
    }

    private static func put<Value: FixedWidthInteger>(_ value: Value, at offset: inout Int, in bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { bytes.replaceSubrange(offset..<(offset + $0.count), with: $0) }
        offset += MemoryLayout<Value>.size
    }

    private static func read<Value: FixedWidthInteger>(_: Value.Type, _ bytes: [UInt8], at offset: Int) -> Value {
        var value = Value.zero
        for index in (0..<MemoryLayout<Value>.size).reversed() { value = value << 8 | Value(bytes[offset + index]) }
        return value
    }
}

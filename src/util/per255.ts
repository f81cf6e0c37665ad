/**
 * The advice added to an l_inf radius that is out of range on images in [0, 1], where the value
 * was almost surely meant in 0-255 pixel steps: "for 20/255 write 0.07843", for the value that
 * was given (not a fixed 8/255), and only when value/255 is itself in range, so that an absurd
 * value (1e9) is not answered with another out-of-range one.
 *
 * @param value the radius given (>= 1 for any advice).
 * @param width the width of the pixel range (advice only for ranges at most 1 wide).
 * @param max the largest radius allowed [width].
 * @returns the advice, or null when none applies.
 * @example per255Advice(20, 1) // "for 20/255 write 0.07843"
 * @example per255Advice(1e9, 1) // null (1e9/255 is out of range too)
 */
export function per255Advice(value: number, width: number, max = width): string | null {
  if (!(value >= 1) || !(width <= 1)) return null;
  const scaled = value / 255;
  if (!(scaled <= max)) return null;
  return `for ${value}/255 write ${Number(scaled.toPrecision(4))}`;
}

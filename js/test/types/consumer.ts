// A TypeScript consumer of the package, type-checked by test/types.test.mjs with `tsc --strict`
// and no skipLibCheck: the package's own .d.ts files must be clean, and these calls typed.
import init, {
  Bollinger,
  Ema,
  Ewma,
  Rate,
  SlidingLog,
  SlidingMean,
  SlidingQuantile,
  SlidingPopulationStdDev,
  SlidingWma,
  TimeEwma,
  slidingMean,
  type Bands,
  type Decision,
} from "slidewin";

await init();

class MyMean extends SlidingMean {
  label = "mine";
}

const mean: SlidingMean = SlidingMean.byCount(3);
const mine: MyMean = MyMean.byTime(1_000);
const pushed: number | undefined = mean.push(1);
mean.add(2);
const many: Float64Array = mean.pushMany([1, 2, 3]);
const replaced: number | undefined = mean.replaceLast(5);
const current: number | undefined = mean.value;
const length: number = mean.length;
const full: boolean = mean.isFull;
const p95: SlidingQuantile = SlidingQuantile.byCount(100, 0.95);
const bands: Bollinger = Bollinger.byCount(20, 2);
const band: Bands | undefined = bands.bands;
const lines: { lower: Float64Array; middle: Float64Array; upper: Float64Array } = bands.pushManyBands([1, 2]);
const ema: Ema = new Ema(9, { seed: "sma" });
const others = [new Ewma(0.5), new TimeEwma(1_000), new Rate(1_000), SlidingWma.byCount(9), SlidingPopulationStdDev.byTime(60_000)];
const decision: Decision = new SlidingLog(10, 1_000).check();
const batch: Float64Array = slidingMean([1, 2, 3], 2);

// @ts-expect-error: the seed is "first" or "sma"
new Ema(9, { seed: "last" });
// @ts-expect-error: byCount needs k
SlidingMean.byCount();

export const used = [mine.label, pushed, many, replaced, current, length, full, p95, band, lines, ema, others, decision, batch];
